"""Small helpers shared by several test modules."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import nbformat

from raytrain_helpers.core import config
from raytrain_helpers.core.config import PRESETS
from raytrain_helpers.worker.job_config import JobConfig

#: A model small enough to build, shard, export and generate with in a test, on CPU, in a second or two.
SMALL_MODEL = dict(PRESETS["tiny"], vocab_size=300, hidden_size=32, intermediate_size=64, num_attention_heads=4)


def job_cfg(**fields) -> JobConfig:
    """A job config for tests of the job's own code: its required fields set to small values, ``fields`` on top
    (checked like the job's: an unknown field is an error)."""
    base = dict(
        run_name="test",
        marker="m0",
        model=dict(SMALL_MODEL),
        data="learnable",
        steps=1,
        seq_len=16,
        batch_size=2,
        learning_rate=1e-3,
        seed=0,
        use_gpu=False,
        storage_path="/nonexistent/storage",
    )
    return JobConfig.from_dict({**base, **fields})


def notebook_outputs(path: Path) -> str:
    """All text an executed notebook printed, errors (name, value, traceback) included."""
    nb = nbformat.read(path, as_version=4)
    out = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            out.append(o.get("text") or o.get("data", {}).get("text/plain", "") or "")
            if o.get("output_type") == "error":
                out.append(f"{o['ename']}: {o['evalue']}\n" + "\n".join(o.get("traceback") or []))
    return "\n".join(out)


def ray_node(name, role, cpu, gpu, slots, alive=True):
    """A node as targets.local.status() reports it."""
    return dict(
        node_id=name * 4,
        name=name,
        role=role,
        alive=alive,
        temp_dir=f"/tmp/raytrain/{name}",
        resources={"CPU": cpu, "GPU": gpu, "memory": 1e9, **({"train_slot": slots} if slots else {})},
    )


def fake_local_status(monkeypatch, running: bool, nodes=()):
    """Make targets.local.status() answer with a real LocalClusterInfo holding these nodes."""
    from raytrain_helpers.targets import local
    from raytrain_helpers.targets.local import raylets

    info = local.LocalClusterInfo(running, "127.0.0.1:6390", "http://127.0.0.1:8266", nodes=list(nodes))
    monkeypatch.setattr(raylets, "status", lambda settings: info)
    return info


def free_port() -> int:
    """A TCP port free on every interface now, taken from 20000 up to the kernel's ephemeral range.

    Ports a test hands to a server it starts later (a cluster's gcs_port, JupyterLab, torch's MASTER_PORT) are not
    taken from the ephemeral range: the Ray clusters of other tests running beside it bind ports there at random
    (agents, workers' clients), and one took a test's gcs_port between the pick and its check. Ray's workers use
    10002-19999, hence 20000 up."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(500) if low > 21000 else ():
        port = random.randrange(20000, low)
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # no such range here: any free port
        s.bind(("", 0))
        return s.getsockname()[1]


def aws_settings(**params):
    """The repository's env.yaml on the aws target, with ``params`` over it (no RAYTRAIN_* variables, no check of the
    installed Ray): what the rendering and Kubernetes tests run with."""
    base = dict(target="aws")
    base.update(params)
    return config.load(Path(__file__).resolve().parents[1] / "env.yaml", environ={}, check_installed_ray=False, **base)
