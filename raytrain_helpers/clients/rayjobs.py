"""The Ray Jobs API, as the tutorial uses it: authenticated client, submit-or-attach, follow, parse the result.

The job's driver prints ``RAYTRAIN_RESULT {json}`` and rank 0 prints ``RAYTRAIN_SUMMARY {json}``; every step
prints ``[train] step k/N loss=...``. :class:`JobRun` is one job as the notebooks see it, parsed from its logs.

:func:`follow` streams the job's log with Ray's own tailing (``JobSubmissionClient.tail_job_logs``, a websocket
the dashboard closes when the job ends), run on a thread of its own so that it also works inside a notebook kernel
whose event loop is already running. What the learner sees is :func:`filter_log`'s selection of it (the steps,
each rank's throughput, checkpoints, errors; once each); every line goes to the full log file.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..core.constants import RESULT_PREFIX, SUMMARY_PREFIX
from ..core.tables import figure, table
from ..worker.job_config import JobConfig

STEP_RE = re.compile(r"\[train\] step (\d+)/(\d+) loss=([-\d.eEnaif+]+) step_time=([\d.]+)s tokens/s=(\d+)")
#: One step line, leniently: ``[train] step k/N`` then ``key=value`` pairs in any order (``eval_loss`` is optional).
STEP_LINE_RE = re.compile(r"\[train\] step (\d+)/(\d+)((?:\s+[\w/]+=\S+)*)")
_PAIR_RE = re.compile(r"([\w/]+)=(\S+)")
#: Step line keys as they are printed -> the metric names ``progress.update`` receives.
STEP_KEYS = {"loss": "loss", "step_time": "step_time_s", "tokens/s": "tokens_per_s", "eval_loss": "eval_loss"}
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}
#: The job metadata key that ties a submission to its run (a re-run attaches to a running job of the same run).
RUN_KEY = "raytrain_run"


def auth_headers() -> dict[str, str]:
    """The bearer token of a cluster started with token authentication (RAY_AUTH_TOKEN or its file), or none."""
    token = os.environ.get("RAY_AUTH_TOKEN")
    if not token and os.environ.get("RAY_AUTH_TOKEN_PATH"):
        try:  # never through a symbolic link put where the token file should be
            fd = os.open(os.environ["RAY_AUTH_TOKEN_PATH"], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd) as f:
                token = f.read().strip()
        except OSError:
            token = None
    return {"Authorization": f"Bearer {token}"} if token else {}


def client(url: str):
    """A ``JobSubmissionClient`` for the Jobs API at ``url``, with the cluster's token when it has one."""
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(url, headers=auth_headers() or None)


def find_active(jobs_client, run_name: str) -> str | None:
    """A job of this run that is still pending or running (so a re-run attaches to it)."""
    for j in jobs_client.list_jobs():
        md = j.metadata or {}
        if md.get(RUN_KEY) == run_name and str(j.status) in ("PENDING", "RUNNING"):
            return j.submission_id
    return None


def latest_of_run(jobs_client, run_name: str) -> tuple[str, str] | None:
    """(submission id, status) of the run's most recently started job on this cluster; None: the cluster ran none."""
    ours = [j for j in jobs_client.list_jobs() if (j.metadata or {}).get(RUN_KEY) == run_name]
    if not ours:
        return None
    last = max(ours, key=lambda j: j.start_time or 0)
    return last.submission_id, str(last.status).split(".")[-1]


def finished(jobs_client, sid: str) -> JobRun:
    """A job that has already ended, read from the cluster: its status and whole log, parsed as :func:`follow`
    parses them (the job finished while nothing followed it)."""
    logs = jobs_client.get_job_logs(sid)
    return JobRun(sid, status_of(jobs_client, sid), logs=logs, result=parse_result(logs), steps=parse_steps(logs))


def status_of(jobs_client, submission_id: str) -> str:
    """``SUCCEEDED``, ``RUNNING``... (without the enum's class name)."""
    return str(jobs_client.get_job_status(submission_id)).split(".")[-1]


@dataclass
class JobRun:
    """One training job: its status, logs, the driver's result and the steps parsed from the logs."""

    submission_id: str
    status: str
    logs: str = ""
    result: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, float]] = field(default_factory=list)
    #: the job's config as its JSON object (``job_config.json``): as submitted, or as staged or recorded earlier;
    #: empty when not known. Read it typed: :attr:`job_config`.
    config: dict[str, Any] = field(default_factory=dict)
    attached: bool = False
    wall_s: float = 0.0
    #: True when 05 found the run already complete and submitted nothing: this is the finished job's record
    already_complete: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "SUCCEEDED" and bool(self.result.get("ok"))

    @property
    def metrics(self) -> dict[str, Any]:
        m = self.result.get("metrics", {}) or {}
        if "ranks" not in m:  # no final checkpoint: rank 0 printed the summary into the logs
            m = dict(m, **parse_summary(self.logs))
        return m

    @property
    def job_config(self) -> JobConfig | None:
        """The job's config, typed; one recorded by an earlier version reads too (None: no readable record)."""
        return JobConfig.from_record(self.config)

    @property
    def ranks(self) -> list[dict[str, Any]]:
        return self.metrics.get("ranks", []) or []

    @property
    def attempts(self) -> list[dict[str, Any]]:
        """The worker groups this job started (see :func:`parse_attempts`): more than one after a restart."""
        return parse_attempts(self.logs)

    def show(self) -> None:
        m = self.metrics
        how = ""
        if self.already_complete:
            how = " (the run was already complete: its recorded results, nothing submitted)"
        elif self.attached:
            how = " (attached to a job submitted earlier)"
        print(f"job {self.submission_id}: {self.status}{how}")
        if self.result.get("error"):
            print(f"  error: {self.result['error']}")
        restarts = self.attempts[1:]
        if restarts:
            froms = ", ".join(str(a["resumed_from"] or 0) for a in restarts)
            print(f"  worker group restarted: resumed after {len(restarts)} failure(s) from step {froms}")
        if m:
            start = m.get("start_step", 0)
            trained = len(m.get("losses") or [])
            print(
                f"  steps {start}->{m.get('step')} of {m.get('steps')}, world size {m.get('world_size')}, "
                + (f"final loss {figure(m.get('loss'), '.4f')}" if trained else "no step trained by this job")
                + (f", resumed from step {m['resumed_from']}" if m.get("resumed_from") else "")
            )
        if self.ranks:
            table(
                [
                    (
                        r["rank"],
                        r["node_id"][:12],
                        r["device"],
                        figure(r.get("tokens_per_s") if r.get("steps_run", 1) else None, ".1f"),
                        f"{r['peak_mem_bytes'] / 2**20:.0f} MiB",
                    )
                    for r in self.ranks
                ],
                ["rank", "node", "device", "tokens/s", "peak memory"],
            )

    def to_json(self) -> dict[str, Any]:
        return dict(
            submission_id=self.submission_id,
            status=self.status,
            result=self.result,
            steps=self.steps,
            config=self.config,
            attached=self.attached,
            wall_s=self.wall_s,
        )

    @classmethod
    def from_json(cls, d: dict[str, Any], logs: str = "") -> JobRun:
        return cls(
            d["submission_id"],
            d["status"],
            logs=logs,
            result=d.get("result", {}),
            steps=d.get("steps", []),
            config=d.get("config", {}),
            attached=d.get("attached", False),
            wall_s=d.get("wall_s", 0.0),
        )


def _last_json(logs: str, prefix: str) -> dict[str, Any]:
    for line in reversed(logs.splitlines()):
        i = line.find(prefix)
        if i >= 0:
            try:
                return json.loads(line[i + len(prefix) :])
            except ValueError:
                continue
    return {}


def parse_result(logs: str) -> dict[str, Any]:
    """The driver's ``RAYTRAIN_RESULT`` record (the last one that parses), or {}."""
    return _last_json(logs, RESULT_PREFIX)


def parse_summary(logs: str) -> dict[str, Any]:
    """Rank 0's ``RAYTRAIN_SUMMARY`` record (the last one that parses), or {}."""
    return _last_json(logs, SUMMARY_PREFIX)


def parse_step_line(line: str) -> dict[str, float] | None:
    """One ``[train] step k/N key=value ...`` line as step, steps, loss, step_time_s, tokens_per_s (and eval_loss
    when the line has it); None for any other line."""
    m = STEP_LINE_RE.search(line)
    if not m:
        return None
    out: dict[str, float] = dict(step=int(m.group(1)), steps=int(m.group(2)))
    for key, raw in _PAIR_RE.findall(m.group(3)):
        name = STEP_KEYS.get(key)
        if name is None:
            continue
        try:
            out[name] = float(raw.rstrip("s")) if key == "step_time" else float(raw)
        except ValueError:
            continue
    return out if "loss" in out else None


def parse_steps(logs: str) -> list[dict[str, float]]:
    """Every ``[train] step`` line: step, steps, loss, step_time_s, tokens_per_s (eval_loss when present)."""
    return [s for s in (parse_step_line(line) for line in logs.splitlines()) if s is not None]


_MARKER_RE = re.compile(r"\[raytrain\] marker=(\S+) rank=(\d+)/(\d+) .*?pid=(\d+)")
_RESUMED_RE = re.compile(r"\[train\] resumed from checkpoint at step (\d+)")


def parse_attempts(logs: str) -> list[dict[str, Any]]:
    """The worker groups one job started, in order: rank 0's pid, the world size, the step it resumed from (None
    when it started from scratch) and the steps it printed. More than one means Ray Train restarted the group after
    a failure (``train.max_failures``); a log line printed twice by Ray is counted once."""
    attempts: list[dict[str, Any]] = []
    pids: set[str] = set()
    for line in logs.splitlines():
        m = _MARKER_RE.search(line)
        if m and m.group(2) == "0" and m.group(4) not in pids:
            pids.add(m.group(4))
            attempts.append(dict(pid=int(m.group(4)), world_size=int(m.group(3)), resumed_from=None, steps=[]))
            continue
        if not attempts:
            continue
        r = _RESUMED_RE.search(line)
        if r:
            attempts[-1]["resumed_from"] = int(r.group(1))
            continue
        st = parse_step_line(line)
        if st is not None and st["step"] not in attempts[-1]["steps"]:
            attempts[-1]["steps"].append(st["step"])
    return attempts


# --------------------------------------------------------------------------------------------------------------
# What the learner sees of the job's log
# --------------------------------------------------------------------------------------------------------------

_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: Ray's prefix on a line an actor printed: ``(RayTrainWorker pid=123)`` or ``(RayTrainWorker pid=123, ip=...)``.
_ACTOR_RE = re.compile(r"^\((?P<actor>[\w.]+) pid=(?P<pid>\d+)(?:, ip=[^)]*)?\)\s?")
#: Lines the learner reads: the job's own lines and Ray Train's decisions about failures.
_KEEP_RE = re.compile(
    r"^\[(train|driver)\] "
    r"|Traceback \(most recent call last\)|^\w*(Error|Exception)\b|\bError: "
    r"|\bNCCL WARN\b|\bworker group\b.*\b(fail|restart|error)|[Dd]eciding to (RESTART|RAISE)"
    r"|\[FailurePolicy\] \w+|Error count: \d+"
    r"|\bhas died\b|\bnode .* (died|dead|was terminated)",
)
#: How many recent visible lines a repeated line is looked for in (Ray prints some worker lines twice, close by).
DEDUP_WINDOW = 64


def visible_line(raw: str) -> str | None:
    """The line as the learner sees it (colours and, for the job's own lines, Ray's actor prefix removed), or None.

    A whitelist: the job's own ``[train]``/``[driver]`` lines, errors and tracebacks, NCCL warnings, and Ray Train's
    words on failed or restarted workers and dead nodes. Everything else is noise the learner cannot act on: Ray
    Train's per-report echo, the summary/result JSON, package uploads, the PreemptionWatcher warning, Ray's
    start-up chatter."""
    line = _ANSI_RE.sub("", raw).rstrip("\r\n")
    if not line.strip():
        return None
    body = _ACTOR_RE.sub("", line, count=1)
    if not _KEEP_RE.search(body):
        return None
    return body if body.startswith(("[train] ", "[driver] ")) else line


#: Ray's own words for an error it logs with a traceback but that needs nothing from the user (seen: Ray Train's
#: controller failing to send an autoscaling resource request on a busy machine).
BENIGN_RE = re.compile(r"safe to ignore this error")
#: Lines inside a traceback: its header, indented frames, and the exception line of a Ray module.
_TRACEBACK_BODY_RE = re.compile(r"^(Traceback \(most recent call last\)|\s|ray\.exceptions\.)")


@dataclass(frozen=True)
class FilterState:
    """What :func:`filter_log` carries from one call to the next."""

    #: the last ``DEDUP_WINDOW`` visible lines (with Ray's actor prefix), to show each line once
    recent: tuple[str, ...] = ()
    #: the actor pid whose traceback Ray called safe to ignore, while its lines are being dropped
    benign_pid: str | None = None


def benign_traceback(raw: str, benign_pid: str | None) -> tuple[bool, str | None]:
    """Whether to drop this line as part of a traceback Ray itself called safe to ignore (the line saying so
    included), and the pid whose traceback is being dropped after it."""
    line = _ANSI_RE.sub("", raw).rstrip("\r\n")
    actor = _ACTOR_RE.match(line)
    pid = actor.group("pid") if actor else ""
    if BENIGN_RE.search(line):
        return True, pid
    if benign_pid == pid and _TRACEBACK_BODY_RE.match(_ACTOR_RE.sub("", line, count=1)):
        return True, pid
    return False, None if benign_pid == pid else benign_pid


def filter_log(lines: Iterable[str], state: FilterState = FilterState()) -> tuple[list[str], FilterState]:
    """Pure: the lines the learner sees, and the state to pass to the next call.

    A line is shown once: a repetition of one of the last ``DEDUP_WINDOW`` visible lines (same actor and pid, same
    text) is dropped, so a step of a restarted worker group (another pid) is shown again."""
    shown: list[str] = []
    window = list(state.recent)
    benign_pid = state.benign_pid
    for raw in lines:
        skip, benign_pid = benign_traceback(raw, benign_pid)
        if skip:
            continue
        text = visible_line(raw)
        if text is None:
            continue
        key = _ANSI_RE.sub("", raw).strip()
        if key in window:
            continue
        window.append(key)
        shown.append(text)
    return shown, FilterState(tuple(window[-DEDUP_WINDOW:]), benign_pid)


class LogView:
    """:func:`filter_log` over a stream of chunks that may cut lines anywhere."""

    def __init__(self) -> None:
        self._partial = ""
        self._state = FilterState()

    def feed(self, chunk: str, *, final: bool = False) -> list[str]:
        text = self._partial + chunk
        lines = text.split("\n")
        self._partial = "" if final else lines.pop()
        shown, self._state = filter_log(lines, self._state)
        return shown


class Progress(Protocol):
    """What ``steps.train.submit(progress=...)`` accepts: ``update`` gets each step's metrics (step, steps, loss,
    step_time_s, tokens_per_s, and eval_loss when the step has it), ``close`` is called once when the job ends."""

    def update(self, metrics: dict) -> None: ...

    def close(self) -> None: ...


#: Ray's client-side loggers whose INFO lines (package upload, websocket closed) mean nothing to the learner.
CLIENT_LOGGERS = (
    "ray.dashboard.modules.dashboard_sdk",
    "ray._private.runtime_env.packaging",
    "ray.dashboard.modules.job.sdk",
)


@contextlib.contextmanager
def quiet_client_logs() -> Iterator[None]:
    """Ray's client-side INFO chatter off while submitting and following (its warnings and errors still show)."""
    for name in CLIENT_LOGGERS:  # each module sets its logger to INFO when first imported: import it before
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    saved = {name: logging.getLogger(name).level for name in CLIENT_LOGGERS}
    for name in CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


# --------------------------------------------------------------------------------------------------------------
# Following a job
# --------------------------------------------------------------------------------------------------------------


class JobFollowError(RuntimeError):
    """The job's log stream could not be followed (the Jobs API went away and did not come back)."""


class JobStatusError(RuntimeError):
    """The cluster could not say what a job's status is: Jobs API unreachable, or the job unknown to it."""


class JobUnknownError(JobStatusError):
    """The cluster's Jobs API answers but does not know the job: the cluster was started after the job ran."""


_CHUNK, _END, _ERROR = "chunk", "end", "error"


class LogTail:
    """``JobSubmissionClient.tail_job_logs`` (an async generator) pumped on a thread with its own event loop, into a
    queue the caller reads. A thread, not the caller's loop: a notebook kernel's loop is already running."""

    def __init__(self, jobs_client, sid: str):
        self.client, self.sid = jobs_client, sid
        self.queue: queue.Queue = queue.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"tail-{sid}", daemon=True)

    def start(self) -> LogTail:
        self.thread.start()
        self._ready.wait(10)
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._task = loop.create_task(self._pump())
            self._ready.set()
            loop.run_until_complete(self._task)
            self.queue.put((_END, None))
        except asyncio.CancelledError:
            self.queue.put((_END, None))
        except Exception as e:  # noqa: BLE001 - handed to the reader, which decides
            self.queue.put((_ERROR, e))
        finally:
            self._ready.set()
            loop.close()

    async def _pump(self) -> None:
        async for chunk in self.client.tail_job_logs(self.sid):
            self.queue.put((_CHUNK, chunk))

    def stop(self) -> None:
        """Cancel the stream (the job itself goes on)."""
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(task.cancel)
        self.thread.join(5)


@dataclass
class _Follow:
    """The state of one :func:`follow`: what was received, shown and written."""

    jobs_client: Any
    sid: str
    quiet: bool
    progress: Any
    log_file: Any
    deadline: float | None
    timeout_s: float
    view: LogView = field(default_factory=LogView)
    received: int = 0
    stopped: bool = False

    def take(self, chunk: str, skip: int, got: int) -> int:
        """Handle a chunk of a (re)connected stream whose first ``skip`` characters were handled before."""
        new = chunk[max(0, skip - got) :] if got < skip else chunk
        got += len(chunk)
        if not new:
            return got
        self.received += len(new)
        if self.log_file is not None:
            self.log_file.write(new)
            self.log_file.flush()
        self.show(self.view.feed(new))
        return got

    def show(self, lines: list[str]) -> None:
        # a progress object that draws nothing (``enabled = False``: no widget front end) still gets the
        # metrics, and the plain step line is printed as without one
        drawn = self.progress is not None and getattr(self.progress, "enabled", True)
        for line in lines:
            metrics = parse_step_line(line) if self.progress is not None else None
            if metrics is not None:
                self.progress.update(metrics)
            if (metrics is None or not drawn) and not self.quiet:
                print(line, flush=True)

    def check_deadline(self) -> None:
        if self.deadline is not None and not self.stopped and time.time() > self.deadline:
            self.jobs_client.stop_job(self.sid)
            self.stopped = True
            if not self.quiet:
                print(f"stopping {self.sid}: it ran past train.job_timeout_s = {self.timeout_s:g} s", flush=True)

    def stream_once(self) -> tuple[str, Any]:
        """One connection of Ray's log tail, read to its end; returns how it ended."""
        tail = LogTail(self.jobs_client, self.sid).start()
        skip, got = self.received, 0
        try:
            while True:
                try:
                    kind, item = tail.queue.get(timeout=1.0)
                except queue.Empty:
                    self.check_deadline()
                    if not tail.thread.is_alive() and tail.queue.empty():
                        return _ERROR, RuntimeError("the log tail's thread ended without a word")
                    continue
                if kind != _CHUNK:
                    return kind, item
                got = self.take(item, skip, got)
                self.check_deadline()
        finally:
            tail.stop()


#: Reconnections of the log stream in a row that bring nothing new before :func:`follow` gives up.
MAX_RECONNECTS = 20


def follow(
    jobs_client,
    sid: str,
    *,
    timeout_s: float = 0,
    quiet: bool = False,
    progress: Progress | None = None,
    log_path: Path | None = None,
) -> JobRun:
    """Follow a job to its end with Ray's log tailing, showing the learner :func:`filter_log`'s lines.

    Step lines go to ``progress.update`` when a progress object is given (printed otherwise); every line received
    is written to ``log_path`` as it arrives, and the whole log, fetched once at the end, replaces it. A job still
    running after ``timeout_s`` seconds (0 = no limit) is stopped. Interrupting this call leaves the job running."""
    t0 = time.time()
    log_file = open(log_path, "w") if log_path is not None else None  # noqa: SIM115 - closed below
    state = _Follow(jobs_client, sid, quiet, progress, log_file, t0 + timeout_s if timeout_s else None, timeout_s)
    if log_path is not None and not quiet:
        print(f"full log (every line, unfiltered): {log_path}", flush=True)
    try:
        with quiet_client_logs():
            status = _stream_to_end(state)
            state.show(state.view.feed("", final=True))
            logs = jobs_client.get_job_logs(sid)
    finally:
        if log_file is not None:
            log_file.close()
        if progress is not None:
            progress.close()
    if log_path is not None:
        Path(log_path).write_text(logs)
    return JobRun(sid, status, logs=logs, result=parse_result(logs), steps=parse_steps(logs), wall_s=time.time() - t0)


def _stream_to_end(state: _Follow) -> str:
    """Reconnect the tail until the job is terminal; the job's final status."""
    idle = 0
    last_error: Any = None
    while True:
        before = state.received
        kind, item = state.stream_once()
        if kind == _ERROR:
            last_error = item
        try:
            status = status_of(state.jobs_client, state.sid)
        except Exception as e:  # noqa: BLE001 - the Jobs API is unreachable for now: try again
            status, last_error = "UNKNOWN", e
        if status in TERMINAL:
            return status
        idle = 0 if state.received > before else idle + 1
        if idle >= MAX_RECONNECTS:
            raise JobFollowError(
                f"lost the log stream of {state.sid} ({type(last_error).__name__}: {last_error}); the job may still "
                f"be running: call submit again to follow it"
            )
        time.sleep(1.0)
