"""Small helpers shared by several test modules."""

from __future__ import annotations

from pathlib import Path

import nbformat


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
