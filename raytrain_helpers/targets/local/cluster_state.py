"""What the local cluster is and where it keeps its files: the shape the settings ask for, the state file each
``up`` writes (``cluster.json`` under ``local.temp_root``), the status Ray's state API gives, and the auth token.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...clients.raystate import list_nodes
from ...core.constants import LOOPBACK, TRAIN_SLOT
from ...core.settings import Settings
from ...core.tables import table
from . import procs, rootdir

STATE_FILE = "cluster.json"


class LocalClusterError(RuntimeError):
    pass


def temp_root(settings: Settings) -> Path:
    """``local.temp_root`` with ``{uid}`` replaced by this user's id."""
    return Path(settings.local.temp_root_path())


def state_path(settings: Settings) -> Path:
    return temp_root(settings) / STATE_FILE


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


@dataclass
class LocalClusterInfo:
    running: bool
    address: str
    dashboard_url: str
    nodes: list[dict[str, Any]] = field(default_factory=list)
    action: str = "status"
    message: str = ""
    shape: dict[str, Any] = field(default_factory=dict)
    #: What the cluster's processes listen on: address ("*" = every interface), port, pid, role.
    listeners: list[dict[str, Any]] = field(default_factory=list)
    #: Whether Ray refuses requests without the cluster's token (local.auth_mode: token).
    token_auth: bool = False

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

    def show_exposure(self) -> None:
        """What the cluster's processes listen on, who can reach it, and whether Ray asks for the token there (Ray
        starts some of its helpers in the background: on a busy machine one may not listen yet)."""
        if not self.running:
            print("local Ray cluster: not running, nothing listens")
            return
        table(
            exposure_rows(self.listeners, self.token_auth),
            ["listens", "reachable from", "Ray token auth"],
            title="what the cluster exposes",
        )


def _port_open(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def read_state(settings: Settings) -> dict[str, Any] | None:
    """The state file, read without following a symbolic link, in a temp root that is the user's own (a link, a file
    of another user or a folder others can change is refused: the state names the interpreter jobs run with)."""
    own_root(settings, create=False)
    try:
        return json.loads(rootdir.read_text(state_path(settings)))
    except FileNotFoundError:
        return None
    except rootdir.TempRootError as e:
        raise LocalClusterError(str(e)) from None
    except (OSError, ValueError):
        return None


def status(settings: Settings) -> LocalClusterInfo:
    loc = settings.local
    address = f"{LOOPBACK}:{loc.gcs_port}"
    url = f"http://{LOOPBACK}:{loc.dashboard_port}"
    state = read_state(settings)
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
        raw = list_nodes(url)
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
                temp_dir=str(temp_root(settings) / ("head" if is_head else names.get(nid) or n.get("node_name", "?"))),
            )
        )
    nodes.sort(key=lambda x: (x["role"] != "head", not x["alive"], x["name"]))
    shape = (state or {}).get("shape", {})
    return LocalClusterInfo(
        True,
        address,
        url,
        nodes=nodes,
        shape=shape,
        listeners=listeners(state, metrics_export_ports(settings)),
        token_auth=_token_on(shape),
    )


def _token_on(shape: dict[str, Any]) -> bool:
    return shape.get("auth_mode") == "token"


#: What each of Ray's listening processes is, told by its command line (a Ray worker listens where its raylet does).
ROLES = (
    ("gcs_server", "GCS"),
    ("/raylet", "raylets and their Ray workers"),
    ("default_worker.py", "raylets and their Ray workers"),
    ("dashboard/dashboard.py", "dashboard metrics (Prometheus)"),
    ("autoscaler/_private/monitor.py", "autoscaler metrics (Prometheus)"),
    ("ray.util.client.server", "Ray Client server"),
    ("DashboardAgent", "dashboard agents"),
    ("RuntimeEnvAgent", "runtime-env agents"),
)


def role(pid: int) -> str:
    line = " ".join(procs.command_line(pid))
    return next((name for key, name in ROLES if key in line), procs.program(pid) or "?")


def listeners(
    state: dict[str, Any] | None, metrics_ports: set[int] | frozenset[int] = frozenset()
) -> list[dict[str, Any]]:
    """Every TCP port the cluster's recorded processes and their descendants listen on, with their role; the two
    ports the settings choose are named by their setting, the dashboard agents' Prometheus exporters (``metrics_ports``,
    :func:`metrics_export_ports`) as such."""
    shape = (state or {}).get("shape", {})
    named = {shape.get("gcs_port"): "GCS (local.gcs_port)", shape.get("dashboard_port"): "dashboard + Jobs API"}
    named.update({port: AGENT_METRICS for port in metrics_ports})
    pids = [r["pid"] for r in procs.with_descendants((state or {}).get("processes", []))]
    return [dict(r, role=named.get(r["port"]) or role(r["pid"])) for r in procs.listening(pids)]


def reach(address: str) -> str:
    """Who can reach a socket bound to ``address``."""
    if address in (LOOPBACK, "::1"):
        return "this machine only (127.0.0.1)"
    return "the network (every interface)" if address == "*" else "the network (the machine's address)"


def exposure_rows(found: list[dict[str, Any]], token_auth: bool) -> list[tuple[str, str, str]]:
    """One row per role and reach, the same from run to run and machine to machine (ports other than the two the
    settings choose are Ray's free picks, and the machine's address differs): what listens, from where it can be
    reached, and whether Ray asks for the token there."""
    rows = sorted({(r["role"], reach(r["address"])) for r in found}, key=lambda x: (x[1].startswith("this"), x))
    guard = "on" if token_auth else "OFF: anyone who reaches it runs code"
    return [(what, where, METRICS_ONLY if "(Prometheus)" in what else guard) for what, where in rows]


#: Ray's Prometheus metrics servers ask for no token: ``GET /metrics`` answers anyone who reaches the port, with
#: figures labelled by node address, job and submission id (never a way to run anything). Ray 2.58 has no option for
#: their address: the dashboard agent's exporter (dashboard/modules/reporter/reporter_agent.py,
#: ``prometheus_exporter.Options(address=get_localhost_ip() if is_localhost(self._ip) else "")``), the dashboard's
#: and the autoscaler's (dashboard/head.py ``_setup_metrics``, autoscaler/_private/monitor.py: ``addr`` only when the
#: node address is loopback) bind loopback only when the node's address is loopback, which ``ray start`` replaces
#: with the machine's address (docs/local-target.md), and ``--metrics-export-port`` sets only the port.
METRICS_ONLY = "no token: metrics only"  # what they serve (node addresses, job ids): 02 and docs/security.md
#: The dashboard agent's Prometheus exporter, one per raylet: the agent process also serves its own HTTP and gRPC
#: ports, which do ask for the token.
AGENT_METRICS = "dashboard agent metrics (Prometheus)"


def metrics_export_ports(settings: Settings) -> set[int]:
    """The ports of the dashboard agents' Prometheus exporters: each agent writes its port to
    ``<session dir>/metrics_export_port_<node id>`` (Ray 2.58, reporter_agent.py ``persist_port(...,
    METRICS_EXPORT_PORT_NAME, ...)``; the name from ``ray._raylet.get_port_filename``), one session dir per raylet
    under the temp root."""
    ports: set[int] = set()
    for f in temp_root(settings).glob("*/session_latest/metrics_export_port_*"):
        try:
            ports.add(int(f.read_text().strip()))
        except (OSError, ValueError):
            continue
    return ports


def session_log_dirs(settings: Settings) -> list[Path]:
    """Each raylet's ``session_latest/logs`` directory (where the train workers' output lands)."""
    root = temp_root(settings)
    dirs = []
    for sub in sorted(root.glob("*/session_latest/logs")):
        dirs.append(sub)
    return dirs


def token_path(settings: Settings) -> Path:
    return temp_root(settings) / "auth_token"


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


def own_root(settings: Settings, create: bool) -> None:
    try:
        (rootdir.claim if create else rootdir.check)(temp_root(settings))
    except rootdir.TempRootError as e:
        raise LocalClusterError(str(e)) from None


def new_auth_token(settings: Settings) -> dict[str, str]:
    """With auth_mode token: a fresh token file that every process of the cluster and the kernel use, created
    0600 in one call (never written first and narrowed after: no moment where others could read it)."""
    if settings.local.auth_mode != "token":
        return {}
    tp = token_path(settings)
    tp.unlink(missing_ok=True)  # removes a planted link itself, never what it points to
    with rootdir.open_nofollow(tp, "w", 0o600, exclusive=True) as f:
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
    return (read_state(settings) or {}).get("python") or sys.executable


def shape_str(shape: dict[str, Any] | None) -> str:
    if not shape:
        return "unknown"
    ws = shape.get("workers", [])
    g = len(ws[0]["gpus"]) if ws else 0
    return (
        f"{len(ws)} worker node(s) x "
        + (f"{g} GPU" if g else f"{ws[0]['num_cpus'] if ws else 0} CPU")
        + f", ports {shape.get('gcs_port')}/{shape.get('dashboard_port')}"
    )
