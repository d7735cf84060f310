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
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...clients.rayjobs import auth_headers
from ...core.config import Settings
from ...core.constants import LOOPBACK, TRAIN_SLOT
from ...core.tables import table

STATE_FILE = "cluster.json"


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
                name="head" if is_head else names.get(nid, f"worker-{nid[:6]}"),
                role="head" if is_head else "worker",
                alive=n.get("state") == "ALIVE",
                resources={k: v for k, v in res.items() if not k.startswith("node:")},
                temp_dir=str(_root(settings) / ("head" if is_head else names.get(nid, "?"))),
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


def _ray_start(args: list[str], env: dict[str, str], log: Path) -> None:
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", *args]
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        # a new session: the raylets must outlive the notebook kernel that started them
        rc = subprocess.run(
            cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=180, start_new_session=True
        ).returncode
    if rc != 0:
        tail = log.read_text()[-2000:]
        raise LocalClusterError(f"`ray start` failed (exit {rc}); see {log}:\n{tail}")


def _base_env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_DOCKER_CPU_WARNING": "1", "PYTHONUNBUFFERED": "1"})
    # The dashboard gives each of its modules 30 s to start; on a busy 2-core machine (a laptop running the
    # notebooks, CI) a module can need longer, and `ray start --head` then fails.
    env.setdefault("RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT", "120")
    # likewise the whole dashboard: `ray start --head` gives it 60 s by default
    env.setdefault("RAY_DASHBOARD_STARTUP_TIMEOUT_S", "180")
    for k in ("RAY_ADDRESS",):
        env.pop(k, None)
    if settings.local.auth_mode != "token":  # never inherit another cluster's token mode
        for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
            env.pop(k, None)
    return env


def up(settings: Settings, plan: bool = False, timeout_s: float = 120.0) -> LocalClusterInfo:
    """Start the head and the worker raylets, or reuse a running cluster of the same shape (idempotent).

    ``plan`` only says what would start. A failed start stops everything it started: nothing is left behind.
    """
    shape = desired_shape(settings)
    current = status(settings)
    if current.running:
        return reuse(settings, current, shape)
    loc = settings.local
    if plan:
        return LocalClusterInfo(
            False,
            f"{LOOPBACK}:{loc.gcs_port}",
            f"http://{LOOPBACK}:{loc.dashboard_port}",
            action="plan",
            shape=shape,
            message=f"would start a head (num-cpus 0, num-gpus 0) and {_shape_str(shape)}",
        )
    for port, what in ((loc.gcs_port, "gcs_port"), (loc.dashboard_port, "dashboard_port")):
        if _port_open(port):
            raise LocalClusterError(
                f"port {port} (local.{what}) is already in use by another program. "
                f"Fix: choose a free port for local.{what}"
            )
    _stop_processes(settings)  # leftovers of a crashed cluster under our temp root
    _root(settings).mkdir(parents=True, exist_ok=True)
    env = _base_env(settings)
    env.update(_new_auth_token(settings))
    from tqdm import tqdm

    bar = tqdm(
        total=1 + len(shape["workers"]),
        desc="starting raylets",
        unit="node",
        file=sys.stderr,
        ncols=80,
        bar_format="{desc}: {n_fmt}/{total_fmt} {bar} {elapsed}",
    )
    try:
        names = _start_raylets(settings, shape, env, timeout_s, on_node=lambda: bar.update(1))
        state_path(settings).write_text(json.dumps(dict(shape=shape, node_names=names, started=time.time()), indent=2))
    except BaseException:
        # nothing half-created is left behind
        _stop_processes(settings)
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
    alive_workers = [n for n in current.workers if n["alive"]]
    if len(alive_workers) == len(shape["workers"]):
        current.action = "reused"
        current.message = "a running cluster of the same shape was reused"
        return current
    raise LocalClusterError(
        f"the running cluster has {len(alive_workers)} of {len(shape['workers'])} worker "
        f"nodes alive. Fix: `raytrain-tutorial down` then re-run"
    )


def _new_auth_token(settings: Settings) -> dict[str, str]:
    """With auth_mode token: a fresh token file (0600) that every process of the cluster and the kernel use."""
    if settings.local.auth_mode != "token":
        return {}
    tp = token_path(settings)
    tp.write_text(secrets.token_hex(32))
    tp.chmod(0o600)
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(tp)}
    os.environ.update(env)
    return env


def _start_raylets(
    settings: Settings, shape: dict[str, Any], env: dict[str, str], timeout_s: float, on_node
) -> dict[str, str]:
    """``ray start`` the head, then each worker; returns node id -> worker name."""
    loc = settings.local
    root = _root(settings)
    log = root / "ray-start.log"
    log.write_text("")
    obj = str(loc.object_store_mb * 1024 * 1024)
    _ray_start(
        [
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
            obj,
            "--temp-dir",
            str(root / "head"),
            "--dashboard-agent-listen-port",
            str(_free_port()),
            "--disable-usage-stats",
        ],
        dict(env, CUDA_VISIBLE_DEVICES=""),
        log,
    )
    url = f"http://{LOOPBACK}:{loc.dashboard_port}"
    _wait(lambda: len(_safe_nodes(url)) >= 1, timeout_s, "the head to register")
    on_node()
    names: dict[str, str] = {}
    for w in shape["workers"]:
        before = {n["node_id"] for n in _safe_nodes(url)}
        _ray_start(
            [
                "--address",
                f"{LOOPBACK}:{loc.gcs_port}",
                "--node-ip-address",
                LOOPBACK,
                "--num-cpus",
                str(w["num_cpus"]),
                "--num-gpus",
                str(len(w["gpus"])),
                "--resources",
                json.dumps({TRAIN_SLOT: w["train_slots"]}),
                "--object-store-memory",
                obj,
                "--temp-dir",
                str(root / w["name"]),
                # Ray's default agent port (52365) is the same for every raylet: on one host the
                # second agent cannot bind it, and job submission then finds no agent
                "--dashboard-agent-listen-port",
                str(_free_port()),
                "--disable-usage-stats",
            ],
            dict(env, CUDA_VISIBLE_DEVICES=",".join(w["gpus"])),
            log,
        )
        _wait(lambda known=before: len(_alive(url) - known) >= 1, timeout_s, f"{w['name']} to register")
        names[(_alive(url) - before).pop()] = w["name"]
        on_node()
    return names


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


def our_pids(settings: Settings) -> list[int]:
    """Processes of this cluster: a command line or working directory under our temp root (or naming our
    GCS port), and all their descendants - Ray renames its agents and workers (``ray::RayTrainWorker``), so
    their command lines no longer say where they belong, but their parent does."""
    root = str(_root(settings).resolve())
    gcs = f":{settings.local.gcs_port}"
    me = os.getpid()
    matched: set[int] = set()
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        pid = int(d.name)
        try:
            stat = (d / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(pid)
        try:
            cwd = os.readlink(d / "cwd")
        except OSError:
            cwd = ""
        if (
            (root + "/") in cmd
            or cmd.endswith(root + " ")
            or cwd == root
            or cwd.startswith(root + "/")
            or (gcs in cmd and "ray" in cmd and ("gcs_server" in cmd or "raylet" in cmd))
        ):
            matched.add(pid)
    todo = list(matched)
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in matched and c != me:
                matched.add(c)
                todo.append(c)
    return sorted(matched)


def _stop_processes(settings: Settings, timeout_s: float = 6.0) -> int:
    pids = our_pids(settings)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (timeout_s if sig == signal.SIGTERM else 5)
        while time.monotonic() < deadline:
            pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _is_zombie(p)]
            if not pids:
                break
            time.sleep(0.2)
        if not pids:
            break
    return len(pids)


def _is_zombie(pid: int) -> bool:
    try:
        return " Z " in Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:4]
    except OSError:
        return True


def down(settings: Settings) -> LocalClusterInfo:
    before = status(settings)
    n = len(our_pids(settings))
    left = _stop_processes(settings)
    state_path(settings).unlink(missing_ok=True)
    after = status(settings)
    if left or after.running:
        raise LocalClusterError(
            f"{left} process(es) of the local cluster did not stop; stop them with `ray stop --force`"
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
