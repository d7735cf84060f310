"""05, before the training job: is the transport between the worker nodes the one it should be, and how fast?

A small Ray job (``raytrain_helpers.worker.transport``) runs one rank on each worker node and times an all-reduce.
On GPUs the ranks' ``NCCL_DEBUG=INFO`` lines come back with the result and go through the same transport audit as
06 (:func:`raytrain_helpers.nccl.audit`): the check reports the bus bandwidth and the transport NCCL chose, and fails
with the fix when the pairs ride TCP sockets instead of the fabric (EFA on aws, P2P between local GPUs) - the silent
fallback caught before the training job runs at a fraction of its speed, not after. On CPU workers there is no NCCL:
gloo's all-reduce is measured all the same and the transport is reported as not applicable.

Submitted like the training job (``runtime_env.working_dir`` and ``env_vars``, the Jobs API address the target's
``job_server`` yields), under a run of its own (``<run_name>-transport``), so that 05's submit never attaches to it.
A passing verdict is kept (``runs/transport-verdict.json``, one for every run: it is the cluster's) with what it
depends on: the cluster's alive nodes (Ray's state API: a new cluster, a replaced pod or raylet has new node ids),
the ranks' environment and the check's sizes. 05 run again on the same nodes with the same settings, under any run
name, shows that verdict instead of measuring it again; ``again=True``
measures anyway; a failed check is never kept, and it removes the verdict kept before it.
"""

from __future__ import annotations

import json
import shlex
import time
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .. import nccl
from ..clients import rayjobs, raystate
from ..core.paths import run_dir, runs_dir
from ..core.settings import Settings
from ..core.tables import table
from ..targets import for_settings
from ..worker.transport import CheckConfig, bus_bandwidth
from . import evidence
from .train import stage_working_dir, worker_env

#: The module the check's job runs (``python -m``).
CHECK_MODULE = "raytrain_helpers.worker.transport"
#: Message size and repetitions: GPUs move 256 MiB per all-reduce (the size where nccl-tests' busbw levels off on
#: fast links), CPUs 4 MiB (gloo over loopback: a few milliseconds each, so the check costs seconds).
GPU_SIZE, GPU_ITERS, GPU_WARMUP = 256 * 2**20, 20, 5
CPU_SIZE, CPU_ITERS, CPU_WARMUP = 4 * 2**20, 10, 2
#: The transport classes of the audit that are TCP (NCCL's socket transport, libfabric's tcp/sockets providers).
TCP_CLASSES = ("socket", "ofi-tcp", "ofi-sockets")
#: What to do when the pairs ride TCP, by the transport that was expected (the target's ``expected_transport``).
FIXES = {
    "efa": "the worker pods must request vpc.amazonaws.com/efa on EFA-enabled nodes (03 shows it allocatable, 06 "
    "runs fi_info -p efa in them) and carry FI_PROVIDER=efa and NCCL_NET_PLUGIN=ofi (04 renders them)",
    "p2p": "the GPUs must reach each other directly: remove NCCL_P2P_DISABLE / NCCL_SHM_DISABLE from nccl.env, and "
    "check `nvidia-smi topo -m` (NV# or PIX between the GPUs)",
    "ib": "the pods need the InfiniBand devices (rdma/ib resources) and NCCL_IB_DISABLE unset",
}
#: nccl.env settings that force TCP on purpose.
FORCING = ("NCCL_NET", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE")


@dataclass
class TransportCheck:
    """The check's verdict, its measurement and its evidence."""

    ok: bool
    verdict: str  # pass | fallback | <the audit's verdict> | n/a | skipped | failed
    transport: str  # what NCCL chose (e.g. "NET/Libfabric/GDRDMA"), or "n/a: CPU (gloo)"
    expected: str
    message: str
    result: dict[str, Any] = field(default_factory=dict)
    audit: Any = None
    submission_id: str = ""
    measured_at: str = ""  # UTC, when the check job ran
    reused: bool = False  # the verdict of an earlier check on the same nodes with the same settings

    @property
    def busbw_gbs(self) -> float | None:
        return self.result.get("busbw_gbs")

    def show(self) -> None:
        print(f"transport check: {'PASS' if self.ok else 'FAIL'} ({self.verdict}) - {self.message}")
        if self.reused:
            print(
                f"(measured by {self.submission_id} at {self.measured_at} on these same nodes with the same settings; "
                "`rt.steps.transport.run(cfg, again=True)` measures again)"
            )
        r = self.result
        if r.get("world"):
            table(
                [
                    (
                        r.get("backend", "?"),
                        r["world"],
                        _size(r.get("size_bytes", 0)),
                        f"{r.get('seconds', 0) * 1e3:.2f}",
                        f"{r.get('algbw_gbs', 0):.2f}",
                        f"{r.get('busbw_gbs', 0):.2f}",
                        self.transport,
                        self.expected,
                    )
                ],
                ["backend", "ranks", "size", "ms", "algbw GB/s", "busbw GB/s", "transport", "expected"],
                title="all-reduce between the worker nodes (busbw = algbw x 2(n-1)/n, as nccl-tests)",
            )
        if r.get("ranks"):
            table(
                [(x["rank"], x["host"], x["node_id"][:12], x["device"]) for x in r["ranks"]],
                ["rank", "host", "ray node", "device"],
            )


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB"


def pair_transport(audit) -> tuple[str, list[str]]:
    """What the world communicator's pairs rode ("NET/Socket", "P2P/CUMEM, NET/Libfabric/GDRDMA"), and their classes."""
    world = getattr(audit, "world", None)
    if world is None:
        return "", []
    labels: dict[str, int] = {}
    classes: set[str] = set()
    for pair in world.pairs.values():
        classes.update(pair.classes)
        for label, n in pair.transports.items():
            labels[label] = labels.get(label, 0) + n
    return ", ".join(sorted(labels, key=lambda k: -labels[k])), sorted(classes)


def _names_a_plugin(name: str, value: Any) -> bool:
    """``NCCL_NET`` naming the aws-ofi-nccl plugin (its names in v1.20.0: Libfabric, AWS Libfabric, OFI) forces the
    fabric, not TCP."""
    return name == "NCCL_NET" and str(value).lower() in ("libfabric", "aws libfabric", "ofi")


def fix_for(expected: str, nccl_env: dict[str, Any]) -> str:
    """The fix for pairs on TCP: what nccl.env forces, else what the expected transport needs."""
    forced = [f"{k}={nccl_env[k]}" for k in FORCING if k in nccl_env and not _names_a_plugin(k, nccl_env[k])]
    if forced:
        return (
            f"nccl.env sets {', '.join(forced)}, which forces TCP: remove it, or set nccl.expect: socket for a "
            "deliberate TCP baseline"
        )
    return FIXES.get(expected, f"make {expected} reachable between the worker pods")


def judge(result: dict[str, Any], expected: str, nccl_env: dict[str, Any] | None = None) -> TransportCheck:
    """The verdict on one check's result (the job's ``RAYTRAIN_RESULT``): pure, so the tests feed it real logs."""
    nccl_env = nccl_env or {}
    if result.get("skipped"):
        return TransportCheck(True, "skipped", "n/a", expected, result["skipped"], result)
    if not result.get("ok") and not result.get("world"):
        return TransportCheck(False, "failed", "?", expected, result.get("error") or "the check job failed", result)
    bw = f"busbw {result['busbw_gbs']:.2f} GB/s over {result['world']} ranks"
    if result.get("backend") == "gloo":
        ok = bool(result.get("ok"))
        why = "" if ok else f"; {result.get('error')}"
        return TransportCheck(ok, "n/a", "n/a: CPU (gloo)", expected, f"{bw} (gloo: no NCCL transport){why}", result)
    audit = nccl.audit(result.get("logs") or {}, expect=expected)
    transport, classes = pair_transport(audit)
    if any(c in TCP_CLASSES for c in classes) and expected not in ("socket", "auto"):
        tcp = sorted({lab for p in audit.world.pairs.values() if p.cls in TCP_CLASSES for lab in p.transports})
        message = (
            f"rank pairs ride {', '.join(tcp)} over TCP, not {expected}: the silent fallback ({bw}). "
            f"Fix: {fix_for(expected, nccl_env)}"
        )
        return TransportCheck(False, "fallback", transport, expected, message, result, audit)
    if not audit.ok:
        return TransportCheck(
            False, audit.verdict, transport or "?", expected, f"{audit.summary} ({bw})", result, audit
        )
    if not result.get("ok"):
        return TransportCheck(False, "failed", transport, expected, f"{result.get('error')} ({bw})", result, audit)
    return TransportCheck(
        True, "pass", transport, expected, f"{transport} as expected for {expected}; {bw}", result, audit
    )


def job_config(settings: Settings, *, size_bytes: int | None = None, iters: int | None = None) -> CheckConfig:
    """The check job's ``job_config.json``: the GPU or CPU sizes, the same GPU decision as the training job."""
    use_gpu = for_settings(settings).job_defaults(settings).use_gpu
    big = use_gpu is not False  # True, or "auto" (aws: the driver decides from the cluster's GPUs)
    return CheckConfig(
        run_name=f"{settings.run_name}-transport",
        marker=uuid.uuid4().hex[:12],
        use_gpu=use_gpu,
        size_bytes=int(size_bytes or (GPU_SIZE if big else CPU_SIZE)),
        iters=int(iters or (GPU_ITERS if big else CPU_ITERS)),
        warmup=GPU_WARMUP if big else CPU_WARMUP,
        wait_s=60,
        collective_timeout_s=120,
    )


def run(
    settings: Settings,
    *,
    size_bytes: int | None = None,
    iters: int | None = None,
    timeout_s: float = 300,
    extra_env: dict[str, str] | None = None,
    again: bool = False,
) -> TransportCheck:
    """Submit the check job, follow it (quietly: its log goes to ``runs/<run>-transport/job.log``), judge it; or,
    for the default check (no sizes, no ``extra_env``) unless ``again``, the kept passing verdict of the same
    nodes and settings (:func:`kept`).

    ``extra_env``: more variables for the ranks (e.g. ``NCCL_P2P_DISABLE=1`` to see the check catch sockets)."""
    target = for_settings(settings)
    cfg = job_config(settings, size_bytes=size_bytes, iters=iters)
    default = size_bytes is None and iters is None and not extra_env
    with target.job_server(settings) as url, rayjobs.quiet_client_logs():
        key = depends_on(settings, cfg, url) if default else None
        earlier = kept(settings, key) if key and not again else None
        if earlier is not None:
            return earlier
        check = _measure(settings, cfg, url, timeout_s, extra_env)
    if key and check.ok:
        keep(settings, key, check)
    elif key:  # a failure is never hidden behind an earlier pass
        _kept_path(settings).unlink(missing_ok=True)
    return check


def _measure(settings: Settings, cfg: CheckConfig, url: str, timeout_s: float, extra_env) -> TransportCheck:
    target = for_settings(settings)
    src = stage_working_dir(settings, cfg)
    sid = f"raytrain-{cfg.run_name}-{cfg.marker}"
    python = shlex.quote(target.job_defaults(settings).python)
    client = rayjobs.client(url)
    client.submit_job(
        entrypoint=f"{python} -m {CHECK_MODULE} --config job_config.json",
        submission_id=sid,
        runtime_env={"working_dir": str(src), "env_vars": worker_env(settings, extra_env)},
        metadata={rayjobs.RUN_KEY: cfg.run_name, "raytrain_marker": cfg.marker},
    )
    job = rayjobs.follow(
        client, sid, timeout_s=timeout_s, quiet=True, log_path=run_dir(settings, cfg.run_name) / "job.log"
    )
    result = job.result or dict(ok=False, error=f"the check job ended {job.status} without a result (see its log)")
    gpus = 1 if result.get("use_gpu") else 0
    check = judge(result, target.expected_transport(settings, gpus), {**settings.nccl.env, **(extra_env or {})})
    check.submission_id = sid
    check.measured_at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    logs = result.get("logs") if isinstance(result.get("logs"), dict) else {}
    evidence.save(settings, "transport-check", logs, job=job, expected=check.expected, check=_record(check))
    return check


def depends_on(settings: Settings, cfg: CheckConfig, url: str) -> dict[str, Any] | None:
    """What a verdict holds for: the alive nodes, the ranks' environment, the check's sizes and GPU decision; None
    when the state API does not answer (then the check is measured)."""
    try:
        nodes = raystate.alive_node_ids(url)
    except (OSError, KeyError, ValueError):  # URLError is an OSError
        return None
    sizes = dict(use_gpu=cfg.use_gpu, size_bytes=cfg.size_bytes, iters=cfg.iters, warmup=cfg.warmup)
    return dict(nodes=nodes, env=worker_env(settings), check=sizes)


def _kept_path(settings: Settings) -> Path:
    return runs_dir(settings) / "transport-verdict.json"


def kept(settings: Settings, key: dict[str, Any]) -> TransportCheck | None:
    """The kept passing verdict for exactly ``key`` (:func:`depends_on`), marked ``reused``; else None."""
    try:
        rec = json.loads(_kept_path(settings).read_text())
        if rec["depends_on"] != key:
            return None
        return TransportCheck(**rec["check"], reused=True)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _record(check: TransportCheck) -> dict[str, Any]:
    """The check as JSON: its fields and result, without the audit object and the NCCL logs (saved apart)."""
    rec = {f.name: getattr(check, f.name) for f in fields(check) if f.name not in ("audit", "reused")}
    rec["result"] = {k: v for k, v in check.result.items() if k != "logs"}
    return rec


def keep(settings: Settings, key: dict[str, Any], check: TransportCheck) -> None:
    """Keep a verdict with what it depends on (its result without the NCCL logs, which 06 reads from the job)."""
    rec = _record(check)
    path = _kept_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(depends_on=key, check=rec), indent=1, default=str))


__all__ = [
    "CHECK_MODULE",
    "FIXES",
    "TCP_CLASSES",
    "TransportCheck",
    "bus_bandwidth",
    "fix_for",
    "job_config",
    "depends_on",
    "judge",
    "keep",
    "kept",
    "pair_transport",
    "run",
]
