"""The ``local`` target: a real Ray cluster on this machine, shaped like the EKS reference.

* a **head** raylet that takes no training work (``--num-cpus 0 --num-gpus 0``, as the head pod's
  ``num-gpus: "0"``), running the GCS, the dashboard and the Ray Jobs server on 127.0.0.1;
* N **worker** raylets standing in for the GPU nodes, each with its own ``--temp-dir`` (a shared temp dir
  makes concurrent runtime-env setup crash), its share of the visible GPUs (``CUDA_VISIBLE_DEVICES``),
  and a ``train_slot`` custom resource: training workers ask for one, so they land only on worker nodes.

``up`` is idempotent: a running cluster of the same shape is reused; a half-started one is stopped
before an error is raised, so nothing is left behind. ``down`` stops only this cluster's processes.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...clients.rayjobs import auth_headers
from ...core.config import Settings
from ...core.constants import LOOPBACK, TRAIN_SLOT
from ...core.tables import table
from . import procs, rootdir

STATE_FILE = "cluster.json"
#: What `ray start` says when its fixed 30 s wait for the raylet to register runs out (the raylet keeps running).
RAY_START_GAVE_UP = "The current node timed out during startup"
#: How often the local head's GCS checks that each raylet is alive (Ray's default: 3000 ms).
HEALTH_CHECK_PERIOD_MS = 1000


class LocalClusterError(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------
# Shape and paths
# --------------------------------------------------------------------------------------------


def _root(settings: Settings) -> Path:
    return Path(settings.local.temp_root)


def state_path(settings: Settings) -> Path:
    return _root(settings) / STATE_FILE


def _visible_gpu_ids() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [x for x in env.split(",") if x.strip() != ""]
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
        if out.returncode == 0:
            return [x.strip() for x in out.stdout.splitlines() if x.strip()]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return []


def desired_shape(settings: Settings) -> dict[str, Any]:
    loc = settings.local
    gpu_ids = _visible_gpu_ids()
    g = loc.gpus_per_worker_node
    if g < 0:
        g = len(gpu_ids) // loc.worker_nodes if len(gpu_ids) >= loc.worker_nodes else 0
    if g * loc.worker_nodes > len(gpu_ids):
        raise LocalClusterError(
            f"local.gpus_per_worker_node = {g} x {loc.worker_nodes} worker nodes needs {g * loc.worker_nodes} GPUs "
            f"but {len(gpu_ids)} are visible. Fix: gpus_per_worker_node: -1 (split what is there) or 0 (CPU)"
        )
    workers = []
    for i in range(loc.worker_nodes):
        ids = gpu_ids[i * g : (i + 1) * g] if g else []
        slots = g if g else loc.cpus_per_worker_node
        workers.append(
            dict(
                name=f"worker-{i}",
                gpus=ids,
                num_cpus=loc.cpus_per_worker_node if not g else max(loc.cpus_per_worker_node, g),
                train_slots=slots,
            )
        )
    return dict(
        gcs_port=loc.gcs_port,
        dashboard_port=loc.dashboard_port,
        object_store_mb=loc.object_store_mb,
        auth_mode=loc.auth_mode,
        workers=workers,
        ray_version=_ray_version(),
    )


def _ray_version() -> str:
    import ray

    return ray.__version__


# --------------------------------------------------------------------------------------------
# Cluster info
# --------------------------------------------------------------------------------------------


@dataclass
class LocalClusterInfo:
    running: bool
    address: str
    dashboard_url: str
    nodes: list[dict[str, Any]] = field(default_factory=list)
    action: str = "status"
    message: str = ""
    shape: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """``plan`` succeeded when it could say what would start; ``down`` when nothing runs any more;
        ``up`` and ``status`` when the cluster runs with a live worker node."""
        if self.action == "plan":
            return True
        if self.action == "stopped":
            return not self.running
        return self.running and any(n["role"] == "worker" and n["alive"] for n in self.nodes)

    @property
    def workers(self) -> list[dict[str, Any]]:
        return [n for n in self.nodes if n["role"] == "worker"]

    @property
    def head(self) -> dict[str, Any] | None:
        return next((n for n in self.nodes if n["role"] == "head"), None)

    def rows(self) -> list[tuple]:
        rows = []
        for n in self.nodes:
            r = n.get("resources", {})
            rows.append(
                (
                    n["name"],
                    n["role"],
                    "alive" if n["alive"] else "DEAD",
                    f"{r.get('CPU', 0):g}",
                    f"{r.get('GPU', 0):g}",
                    f"{r.get(TRAIN_SLOT, 0):g}",
                    n["node_id"][:12],
                )
            )
        return rows

    def show(self) -> None:
        print(
            f"local Ray cluster: {'running' if self.running else 'not running'} ({self.action})"
            + (f" - {self.message}" if self.message else "")
        )
        if self.running:
            print(f"  GCS address:   {self.address}")
            print(f"  dashboard/jobs: {self.dashboard_url}   (127.0.0.1 only)")
            table(self.rows(), ["node", "role", "state", "CPU", "GPU", TRAIN_SLOT, "node id"])


def _port_open(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _http_json(url: str, timeout: float = 5.0) -> Any:
    req = urllib.request.Request(url, headers=auth_headers())
    with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - loopback only
        return json.loads(r.read().decode())


def _list_nodes(dashboard_url: str) -> list[dict[str, Any]]:
    """Alive and dead nodes from the state API (GET /api/v0/nodes)."""
    data = _http_json(f"{dashboard_url}/api/v0/nodes?limit=1000&detail=1")
    return data["data"]["result"]["result"]


def _read_state(settings: Settings) -> dict[str, Any] | None:
    p = state_path(settings)
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def status(settings: Settings) -> LocalClusterInfo:
    loc = settings.local
    address = f"{LOOPBACK}:{loc.gcs_port}"
    url = f"http://{LOOPBACK}:{loc.dashboard_port}"
    state = _read_state(settings)
    _apply_auth_env(settings, state)
    if not _port_open(loc.gcs_port) or not _port_open(loc.dashboard_port):
        return LocalClusterInfo(
            False,
            address,
            url,
            message="no head listening"
            if state is None
            else "state file present but the head is not answering (run `raytrain-tutorial down`)",
            shape=(state or {}).get("shape", {}),
        )
    try:
        raw = _list_nodes(url)
    except (urllib.error.URLError, OSError, KeyError, ValueError) as e:
        return LocalClusterInfo(False, address, url, message=f"head answers but the state API does not: {e}")
    names = (state or {}).get("node_names", {})
    nodes = []
    for n in raw:
        nid = n["node_id"]
        is_head = bool(n.get("is_head_node"))
        res = n.get("resources_total", {}) or {}
        nodes.append(
            dict(
                node_id=nid,
                name="head" if is_head else names.get(nid) or n.get("node_name") or f"worker-{nid[:6]}",
                role="head" if is_head else "worker",
                alive=n.get("state") == "ALIVE",
                resources={k: v for k, v in res.items() if not k.startswith("node:")},
                temp_dir=str(_root(settings) / ("head" if is_head else names.get(nid) or n.get("node_name", "?"))),
            )
        )
    nodes.sort(key=lambda x: (x["role"] != "head", not x["alive"], x["name"]))
    return LocalClusterInfo(True, address, url, nodes=nodes, shape=(state or {}).get("shape", {}))


def session_log_dirs(settings: Settings) -> list[Path]:
    """Each raylet's ``session_latest/logs`` directory (where the train workers' output lands)."""
    root = _root(settings)
    dirs = []
    for sub in sorted(root.glob("*/session_latest/logs")):
        dirs.append(sub)
    return dirs


# --------------------------------------------------------------------------------------------
# Auth (Ray token authentication, off by default in 2.58)
# --------------------------------------------------------------------------------------------


def token_path(settings: Settings) -> Path:
    return _root(settings) / "auth_token"


def _apply_auth_env(settings: Settings, state: dict[str, Any] | None = None) -> dict[str, str]:
    """With auth_mode: token every process (raylets, the Jobs client, the kernel) uses the same token file."""
    mode = (state or {}).get("shape", {}).get("auth_mode", settings.local.auth_mode)
    if mode != "token":
        return {}
    tp = token_path(settings)
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(tp)}
    if tp.exists():
        os.environ.update(env)
    return env


# --------------------------------------------------------------------------------------------
# up / down
# --------------------------------------------------------------------------------------------


class _Recorder:
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
            tmp.write_text(json.dumps(self.state, indent=2))
            tmp.replace(self.path)


def _ray_start(
    args: list[str], env: dict[str, str], log: Path, node: str, recorder: _Recorder, aborted=lambda: False
) -> None:
    """``ray start`` as the leader of a new session (the raylets outlive the kernel that started them); every
    process it leaves in that session is recorded, started well or not, so a failure can stop them all.
    ``aborted()`` says early that the start has failed (``ray start`` itself would wait 30 s more)."""
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", *args]
    with open(log, "a") as f:
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
        tail = log.read_text()[-2000:]
        if RAY_START_GAVE_UP in tail and any(procs.program(r["pid"]) == "raylet" for r in records if procs.is_alive(r)):
            # `ray start` waits a fixed 30 s for its raylet to register, then exits but leaves the raylet running;
            # on a busy machine it registers later, which the caller waits for with its own timeout
            with open(log, "a") as f:
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


def _start_node(args_of, env: dict[str, str], log: Path, node: str, temp_dir: Path, recorder: _Recorder) -> None:
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
        with open(log, "a") as f:
            f.write(f"({note})\n")
        print(note, flush=True)


def _base_env(settings: Settings) -> dict[str, str]:
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


def _own_root(settings: Settings, create: bool) -> None:
    try:
        (rootdir.claim if create else rootdir.check)(_root(settings))
    except rootdir.TempRootError as e:
        raise LocalClusterError(str(e)) from None


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


def up(settings: Settings, plan: bool = False, timeout_s: float = 120.0) -> LocalClusterInfo:
    """Start the head and the worker raylets, or reuse a running cluster of the same shape (idempotent).

    ``plan`` only says what would start. A failed start stops everything it started: nothing is left behind.
    """
    shape = desired_shape(settings)
    _own_root(settings, create=False)
    current = status(settings)
    if current.running:
        return reuse(settings, current, shape)
    loc = settings.local
    if plan:
        check_ports(settings)
        return LocalClusterInfo(
            False,
            f"{LOOPBACK}:{loc.gcs_port}",
            f"http://{LOOPBACK}:{loc.dashboard_port}",
            action="plan",
            shape=shape,
            message=f"would start a head (num-cpus 0, num-gpus 0) and {_shape_str(shape)}",
        )
    _stop_recorded(settings)  # leftovers of a crashed cluster: only the processes its state file records
    check_ports(settings)  # before anything is created
    _own_root(settings, create=True)
    env = _base_env(settings)
    env.update(new_auth_token(settings))
    from tqdm import tqdm

    bar = tqdm(
        total=1 + len(shape["workers"]),
        desc="starting raylets",
        unit="node",
        file=sys.stderr,
        ncols=80,
        bar_format="{desc}: {n_fmt}/{total_fmt} {bar} {elapsed}",
    )
    recorder = _Recorder(settings, shape)
    try:
        _start_raylets(settings, shape, env, timeout_s, recorder, on_node=lambda: bar.update(1))
    except BaseException:
        # nothing half-created is left behind
        stop_gcs_last(recorder.state["processes"])
        state_path(settings).unlink(missing_ok=True)
        raise
    finally:
        bar.close()
    info = status(settings)
    info.action = "started"
    info.message = f"head + {len(shape['workers'])} worker node(s) started"
    return info


def reuse(settings: Settings, current: LocalClusterInfo, shape: dict[str, Any]) -> LocalClusterInfo:
    """A running cluster is reused when it has the shape the settings ask for, and refused otherwise."""
    have = (_read_state(settings) or {}).get("shape")
    if have != shape:
        raise LocalClusterError(
            f"a local Ray cluster is already running on {LOOPBACK}:{settings.local.gcs_port} with a different "
            f"shape ({_shape_str(have)}) than the settings ask for ({_shape_str(shape)}). "
            f"Fix: `raytrain-tutorial down` then re-run, or change local.gcs_port/dashboard_port"
        )
    alive = {n["name"] for n in current.workers if n["alive"]}
    if len(alive) == len(shape["workers"]):
        current.action = "reused"
        current.message = "a running cluster of the same shape was reused"
        return current
    return restart_workers(settings, [w for w in shape["workers"] if w["name"] not in alive])


def restart_workers(settings: Settings, dead: list[dict[str, Any]], timeout_s: float = 120.0) -> LocalClusterInfo:
    """Start again the worker nodes of a running cluster that died (killed, out of memory), under the same names
    and temp dirs; the head and the live workers are kept, and so is the auth token. What is left of a dead
    node's recorded processes is stopped first."""
    recorder = _Recorder(settings, desired_shape(settings), state=_read_state(settings))
    names = {w["name"] for w in dead}
    stop_gcs_last([r for r in recorder.state["processes"] if r.get("node") in names])
    env = dict(_base_env(settings), **auth_env(settings))
    for w in dead:
        _start_worker(settings, w, env, recorder)
    url = f"http://{LOOPBACK}:{settings.local.dashboard_port}"
    _wait(lambda: len(_named(url, names)) == len(names), timeout_s, "the restarted worker node(s) to register")
    recorder.add([], _named(url, names))
    info = status(settings)
    info.action = "repaired"
    info.message = f"worker node(s) {', '.join(sorted(names))} had died and were started again"
    return info


def new_auth_token(settings: Settings) -> dict[str, str]:
    """With auth_mode token: a fresh token file that every process of the cluster and the kernel use, created
    0600 in one call (never written first and narrowed after: no moment where others could read it)."""
    if settings.local.auth_mode != "token":
        return {}
    tp = token_path(settings)
    tp.unlink(missing_ok=True)
    fd = os.open(tp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    env = auth_env(settings)
    os.environ.update(env)
    return env


def auth_env(settings: Settings) -> dict[str, str]:
    """The variables that point Ray at the cluster's token file (none with auth_mode disabled)."""
    if settings.local.auth_mode != "token":
        return {}
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_path(settings))}


def cluster_python(settings: Settings) -> str:
    """The interpreter the running cluster's raylets were started with (this one when nothing records it)."""
    return (_read_state(settings) or {}).get("python") or sys.executable


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
        str(_root(settings) / "head"),
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
        str(_root(settings) / w["name"]),
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


def _start_raylets(
    settings: Settings, shape: dict[str, Any], env: dict[str, str], timeout_s: float, recorder: _Recorder, on_node
) -> None:
    """``ray start`` the head, then the workers, several at once where the CPUs allow (each has its own temp dir
    and node name); records each process and node id -> worker name in the state file."""
    root = _root(settings)
    log = root / "ray-start.log"
    log.write_text("")
    head_env = dict(env, CUDA_VISIBLE_DEVICES="")
    _start_node(lambda: _head_args(settings), head_env, log, "head", root / "head", recorder)
    url = f"http://{LOOPBACK}:{settings.local.dashboard_port}"
    _wait(lambda: len(_safe_nodes(url)) >= 1, timeout_s, "the head to register")
    on_node()

    def start_worker(w: dict[str, Any]) -> None:
        _start_worker(settings, w, env, recorder)
        on_node()

    with ThreadPoolExecutor(max_workers=start_parallelism(len(shape["workers"]))) as pool:
        for future in [pool.submit(start_worker, w) for w in shape["workers"]]:
            future.result()  # the first failure is raised once every start has returned (and been recorded)
    wanted = {w["name"] for w in shape["workers"]}
    _wait(lambda: len(_named(url, wanted)) == len(wanted), timeout_s, "every worker node to register")
    recorder.add([], _named(url, wanted))


def _start_worker(settings: Settings, w: dict[str, Any], env: dict[str, str], recorder: _Recorder) -> None:
    """``ray start`` one worker node in its own temp dir, with its share of the GPUs."""
    root = _root(settings)
    (root / w["name"]).mkdir(exist_ok=True)
    wlog = root / w["name"] / "ray-start.log"
    wlog.write_text("")
    worker_env = dict(env, CUDA_VISIBLE_DEVICES=",".join(w["gpus"]))
    _start_node(lambda: _worker_args(settings, w), worker_env, wlog, w["name"], root / w["name"], recorder)


def _named(url: str, wanted: set[str]) -> dict[str, str]:
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
        return _list_nodes(url)
    except (urllib.error.URLError, OSError, KeyError, ValueError):
        return []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _wait(pred, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.5)
    raise LocalClusterError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def _shape_str(shape: dict[str, Any] | None) -> str:
    if not shape:
        return "unknown"
    ws = shape.get("workers", [])
    g = len(ws[0]["gpus"]) if ws else 0
    return (
        f"{len(ws)} worker node(s) x "
        + (f"{g} GPU" if g else f"{ws[0]['num_cpus'] if ws else 0} CPU")
        + f", ports {shape.get('gcs_port')}/{shape.get('dashboard_port')}"
    )


def _recorded(settings: Settings) -> list[dict[str, Any]] | None:
    """The processes the state file records (None: no state file, or one written before processes were)."""
    state = _read_state(settings)
    if state is None or "processes" not in state:
        return None
    return list(state["processes"])


def our_pids(settings: Settings) -> list[int]:
    """The live processes this cluster started (recorded by pid and start time when each raylet started) and
    their descendants: Ray's workers, agents and job drivers. Nothing else, whatever its command line says."""
    return [r["pid"] for r in procs.with_descendants(_recorded(settings) or [])]


def stop_gcs_last(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stop the recorded processes and their descendants, the head's GCS only once the rest is gone; returns what
    still runs. A raylet told to stop says goodbye to the GCS first: signalled together with the GCS, the raylets
    and the autoscaler's monitor outlived SIGTERM by more than 8 s and were killed; with the GCS still answering,
    all of them exit within about 2 s, and the GCS then at once."""
    gcs = [r for r in records if procs.is_alive(r) and procs.program(int(r["pid"])) == "gcs_server"]
    return procs.stop([r for r in records if r not in gcs]) + procs.stop(gcs)


def _stop_recorded(settings: Settings) -> list[dict[str, Any]]:
    """Stop the recorded processes and their descendants; the state file goes once none is left."""
    left = stop_gcs_last(_recorded(settings) or [])
    if not left:
        state_path(settings).unlink(missing_ok=True)
    return left


def down(settings: Settings) -> LocalClusterInfo:
    """Stop only what this cluster started (see :func:`our_pids`), and check that it is gone."""
    _own_root(settings, create=False)
    before = status(settings)
    if _recorded(settings) is None and before.running:
        raise LocalClusterError(
            f"a Ray cluster answers on {LOOPBACK}:{settings.local.gcs_port} but {state_path(settings)} records no "
            f"process of it (another program's cluster, or one started by an older version of this tool), so "
            f"nothing was stopped. Fix: stop it where it was started, or choose other local.gcs_port/dashboard_port"
        )
    n = len(our_pids(settings))
    left = _stop_recorded(settings)
    after = status(settings)
    if left:
        raise LocalClusterError(
            f"{len(left)} process(es) of the local cluster did not stop (pids "
            f"{', '.join(str(r['pid']) for r in left[:10])}). Fix: run `raytrain-tutorial down` again"
        )
    after.action = "stopped"
    after.message = (
        f"stopped {len(before.nodes)} node(s), {n} process(es)" if before.running or n else "nothing was running"
    )
    return after


class TeardownResult:
    def __init__(self, steps: list[tuple[str, bool, str]]):
        self.steps = steps

    @property
    def ok(self) -> bool:
        return all(ok for _, ok, _ in self.steps)

    def show(self) -> None:
        table(
            [(name, "gone" if ok else "LEFT", ev) for name, ok, ev in self.steps],
            ["what", "state", "evidence"],
            title="teardown (reverse order)",
            max_width=90,
        )


def teardown(settings: Settings) -> TeardownResult:
    """Stop the local cluster and check by listing that none of its processes is left."""
    info = down(settings)
    left = our_pids(settings)
    return TeardownResult(
        [
            (
                "local Ray cluster (head + worker raylets)",
                not info.running and not left,
                f"{info.message}; {len(left)} process(es) left",
            )
        ]
    )
