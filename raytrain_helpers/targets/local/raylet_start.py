"""Starting the raylets: ``ray start`` for the head and each worker node (its arguments, ports and environment),
each process recorded in the state file as it starts, a node started again when its agents were too slow.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ...clients.raystate import list_nodes
from ...core.constants import LOOPBACK, TRAIN_SLOT
from ...core.settings import Settings
from . import procs, rootdir
from .cluster_state import LocalClusterError, state_path, temp_root
from .stopping import stop_gcs_last

#: What `ray start` says when its fixed 30 s wait for the raylet to register runs out (the raylet keeps running).
RAY_START_GAVE_UP = "The current node timed out during startup"
#: How often the local head's GCS checks that each raylet is alive (Ray's default: 3000 ms).
HEALTH_CHECK_PERIOD_MS = 1000


class Recorder:
    """The cluster's state file, written as each raylet starts: a crash half-way still leaves the record of every
    process started so far (pid + start time), which the next ``up`` or ``down`` stops."""

    def __init__(self, settings: Settings, shape: dict[str, Any], state: dict[str, Any] | None = None):
        """``state``: a running cluster's record, to add to (a restarted node); None starts a new one."""
        self.path = state_path(settings)
        self.lock = threading.Lock()
        self.state: dict[str, Any] = dict(
            shape=shape, node_names={}, python=sys.executable, processes=[], started=time.time()
        )
        self.state.update(state or {})

    def add(self, records: list[dict[str, Any]], names: dict[str, str] | None = None) -> None:
        with self.lock:
            self.state["processes"].extend(records)
            self.state["node_names"].update(names or {})
            tmp = self.path.with_suffix(".tmp")
            tmp.unlink(missing_ok=True)
            with rootdir.open_nofollow(tmp, "w", exclusive=True) as f:
                f.write(json.dumps(self.state, indent=2))
            tmp.replace(self.path)  # a rename replaces a link put at cluster.json, never writes through it


def _ray_start(
    args: list[str], env: dict[str, str], log: Path, node: str, recorder: Recorder, aborted=lambda: False
) -> None:
    """``ray start`` as the leader of a new session (the raylets outlive the kernel that started them); every
    process it leaves in that session is recorded, started well or not, so a failure can stop them all.
    ``aborted()`` says early that the start has failed (``ray start`` itself would wait 30 s more)."""
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", *args]
    with rootdir.open_nofollow(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = _wait_or_kill(proc, 180.0, aborted)
        finally:
            # the session id is the leader's pid, which Linux does not reuse while a process of the session lives
            records = procs.session_records(proc.pid, node=node)
            recorder.add(records)
    if rc != 0:
        tail = rootdir.read_text(log)[-2000:]
        if RAY_START_GAVE_UP in tail and any(procs.program(r["pid"]) == "raylet" for r in records if procs.is_alive(r)):
            # `ray start` waits a fixed 30 s for its raylet to register, then exits but leaves the raylet running;
            # on a busy machine it registers later, which the caller waits for with its own timeout
            with rootdir.open_nofollow(log, "a") as f:
                f.write(f"(the {node}'s raylet runs: waiting for it to register)\n")
            return
        raise LocalClusterError(f"`ray start` for the {node} failed (exit {rc}); see {log}:\n{tail}")


def _wait_or_kill(proc: subprocess.Popen, timeout_s: float, aborted) -> int:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            if aborted() or time.monotonic() > deadline:
                proc.kill()
                return proc.wait()


#: What a raylet writes when its agents did not come up within Ray's fixed 15 s (not configurable in Ray 2.58):
#: it waits for each agent to write its port to a file, then aborts.
SLOW_AGENTS = "Timed out waiting for file"
#: Attempts at one node's ``ray start`` when it failed only because its agents were slow.
START_ATTEMPTS = 3


class RayletLog:
    """The ``raylet.out`` of a node's latest session, read from where it ended when an attempt began (a node
    started again joins the same session and its raylet writes on in the same file)."""

    def __init__(self, temp_dir: Path):
        self.path = temp_dir / "session_latest" / "logs" / "raylet.out"
        self.offset = self._size()

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def agents_were_slow(self) -> bool:
        """Whether this attempt's raylet aborted waiting for its agents' port files."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset if self._size() >= self.offset else 0)
                return SLOW_AGENTS.encode() in f.read()
        except OSError:
            return False


def _start_node(args_of, env: dict[str, str], log: Path, node: str, temp_dir: Path, recorder: Recorder) -> None:
    """``ray start`` for one node, started again when its raylet aborted because its agents were slow.

    Each raylet starts two Python agents and gives them 15 s to write their ports. On a busy 2-core machine
    (CI running the tests, a laptop running the notebooks) importing them can take 30 s the first time; a second
    start finds the files in the page cache. The attempt's processes are stopped before the next one."""
    for attempt in range(1, START_ATTEMPTS + 1):
        raylet_log = RayletLog(temp_dir)
        try:
            _ray_start(args_of(), env, log, node, recorder, aborted=raylet_log.agents_were_slow)
            return
        except LocalClusterError as e:
            if not raylet_log.agents_were_slow():
                raise
            if attempt == START_ATTEMPTS:
                raise LocalClusterError(
                    f"the {node}'s raylet aborted {attempt} times because its agents took over 15 s to start: "
                    f"this machine is too busy. Fix: close other programs, or ask for fewer raylets "
                    f"(`-p worker_nodes 1`), then run 02 again\n{e}"
                ) from None
        with recorder.lock:
            mine = [r for r in recorder.state["processes"] if r.get("node") == node]
        stop_gcs_last(mine)
        note = (
            f"the {node}'s raylet aborted: its agents took over 15 s to start on this busy machine; "
            f"starting it again (attempt {attempt + 1} of {START_ATTEMPTS})"
        )
        with rootdir.open_nofollow(log, "a") as f:
            f.write(f"({note})\n")
        print(note, flush=True)


def base_env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_DOCKER_CPU_WARNING": "1", "PYTHONUNBUFFERED": "1"})
    # The dashboard gives each of its modules 30 s to start; on a busy 2-core machine (a laptop running the
    # notebooks, CI) a module can need longer, and `ray start --head` then fails.
    env.setdefault("RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT", "120")
    # likewise the whole dashboard: `ray start --head` gives it 60 s by default
    env.setdefault("RAY_DASHBOARD_STARTUP_TIMEOUT_S", "180")
    # The GCS declares a node dead after `health_check_failure_threshold` (5) failed checks, one every
    # `health_check_period_ms` (3000 by default): a killed raylet (its port refuses at once) was named dead about 15 s
    # after it died, while the failed job's driver waited to name it. Every node here is on this machine: one check a
    # second names it within about 5 s. A raylet that is alive but slow is still given `health_check_timeout_ms`
    # (10 s) per check, as before.
    env.setdefault("RAY_health_check_period_ms", str(HEALTH_CHECK_PERIOD_MS))
    for k in ("RAY_ADDRESS",):
        env.pop(k, None)
    if settings.local.auth_mode != "token":  # never inherit another cluster's token mode
        for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
            env.pop(k, None)
    return env


def check_ports(settings: Settings) -> None:
    """Both ports must be free before anything starts: the error names the port, its holder and the setting."""
    loc = settings.local
    # the GCS binds every interface (Ray replaces a loopback address); the dashboard binds 127.0.0.1
    for port, what, host in ((loc.gcs_port, "gcs_port", ""), (loc.dashboard_port, "dashboard_port", LOOPBACK)):
        if not procs.port_free(port, host):
            raise LocalClusterError(
                f"port {port} (local.{what}) is already in use, held by {procs.port_holder(port)}. "
                f"Fix: stop that program, or choose a free port: `-p {what} N` or `{what}: N` under `local:` "
                f"in env.yaml"
            )


def _head_args(settings: Settings) -> list[str]:
    loc = settings.local
    return [
        "--head",
        "--node-ip-address",
        LOOPBACK,
        "--port",
        str(loc.gcs_port),
        "--dashboard-host",
        LOOPBACK,
        "--dashboard-port",
        str(loc.dashboard_port),
        "--include-dashboard",
        "true",
        "--num-cpus",
        "0",
        "--num-gpus",
        "0",
        "--object-store-memory",
        str(loc.object_store_mb * 1024 * 1024),
        "--temp-dir",
        str(temp_root(settings) / "head"),
        "--dashboard-agent-listen-port",
        str(_free_port()),
        # With grpcio installed, `ray start --head` also starts a Ray Client server, on 10001 unless told otherwise
        # (0 is refused). gRPC binds with SO_REUSEPORT, so a second head on the same host (another Ray cluster of
        # the user's, the tests' cluster beside the tutorial's) listens on 10001 as well, and the kernel hands
        # each `ray://` connection to either cluster. The tutorial never uses Ray Client: a free port keeps this
        # head off every other cluster's port.
        "--ray-client-server-port",
        str(_free_port()),
        "--disable-usage-stats",
    ]


def _worker_args(settings: Settings, w: dict[str, Any]) -> list[str]:
    loc = settings.local
    return [
        "--address",
        f"{LOOPBACK}:{loc.gcs_port}",
        "--node-ip-address",
        LOOPBACK,
        # the name tells the nodes apart in the state API when they start at the same time
        "--node-name",
        w["name"],
        "--num-cpus",
        str(w["num_cpus"]),
        "--num-gpus",
        str(len(w["gpus"])),
        "--resources",
        json.dumps({TRAIN_SLOT: w["train_slots"]}),
        "--object-store-memory",
        str(loc.object_store_mb * 1024 * 1024),
        "--temp-dir",
        str(temp_root(settings) / w["name"]),
        # Ray's default agent port (52365) is the same for every raylet: on one host the
        # second agent cannot bind it, and job submission then finds no agent
        "--dashboard-agent-listen-port",
        str(_free_port()),
        "--disable-usage-stats",
    ]


def start_parallelism(workers: int, cpus: int | None = None) -> int:
    """How many worker raylets start at once: one per 4 CPUs (each start runs a raylet and two Python agents; a
    raylet aborts when its agents take over 15 s to come up, which two at once on a busy 2-core machine do)."""
    return max(1, min(workers, (cpus or os.cpu_count() or 1) // 4))


def start_raylets(
    settings: Settings, shape: dict[str, Any], env: dict[str, str], timeout_s: float, recorder: Recorder, on_node
) -> None:
    """``ray start`` the head, then the workers, several at once where the CPUs allow (each has its own temp dir
    and node name); records each process and node id -> worker name in the state file."""
    root = temp_root(settings)
    log = root / "ray-start.log"
    rootdir.open_nofollow(log, "w").close()
    rootdir.own_dir(root / "head")
    # The head's dashboard and autoscaler monitor serve Prometheus metrics on fixed ports (44227, 44217) on every
    # interface: a second cluster on the host found them taken and served none. Free ports of its own instead.
    head_env = dict(
        env, CUDA_VISIBLE_DEVICES="", DASHBOARD_METRIC_PORT=str(_free_port()), AUTOSCALER_METRIC_PORT=str(_free_port())
    )
    _start_node(lambda: _head_args(settings), head_env, log, "head", root / "head", recorder)
    url = f"http://{LOOPBACK}:{settings.local.dashboard_port}"
    wait_until(lambda: len(_safe_nodes(url)) >= 1, timeout_s, "the head to register")
    on_node()

    def start_worker(w: dict[str, Any]) -> None:
        start_worker_node(settings, w, env, recorder)
        on_node()

    with ThreadPoolExecutor(max_workers=start_parallelism(len(shape["workers"]))) as pool:
        for future in [pool.submit(start_worker, w) for w in shape["workers"]]:
            future.result()  # the first failure is raised once every start has returned (and been recorded)
    wanted = {w["name"] for w in shape["workers"]}
    wait_until(lambda: len(named_nodes(url, wanted)) == len(wanted), timeout_s, "every worker node to register")
    recorder.add([], named_nodes(url, wanted))


def start_worker_node(settings: Settings, w: dict[str, Any], env: dict[str, str], recorder: Recorder) -> None:
    """``ray start`` one worker node in its own temp dir, with its share of the GPUs."""
    root = temp_root(settings)
    rootdir.own_dir(root / w["name"])
    wlog = root / w["name"] / "ray-start.log"
    rootdir.open_nofollow(wlog, "w").close()
    worker_env = dict(env, CUDA_VISIBLE_DEVICES=",".join(w["gpus"]))
    _start_node(lambda: _worker_args(settings, w), worker_env, wlog, w["name"], root / w["name"], recorder)


def named_nodes(url: str, wanted: set[str]) -> dict[str, str]:
    """node id -> name of the live nodes named in ``wanted``."""
    return {
        n["node_id"]: n.get("node_name")
        for n in _safe_nodes(url)
        if n.get("state") == "ALIVE" and n.get("node_name") in wanted
    }


def _alive(url: str) -> set[str]:
    return {n["node_id"] for n in _safe_nodes(url) if n.get("state") == "ALIVE"}


def _safe_nodes(url: str) -> list[dict[str, Any]]:
    try:
        return list_nodes(url)
    except (urllib.error.URLError, OSError, KeyError, ValueError):
        return []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def wait_until(pred, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.5)
    raise LocalClusterError(f"timed out after {timeout_s:.0f} s waiting for {what}")
