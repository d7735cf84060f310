"""Step 03: devices. local: what each worker node offers. (aws: the device plugins - see the k8s issue.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import Settings


@dataclass
class LocalDevices:
    rows: list[tuple] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def show(self) -> None:
        from .report import table
        table(self.rows, ["node", "role", "GPUs", "train slots", "backend"], title="devices per node")
        for p in self.problems:
            print(f"PROBLEM: {p}")


def step(settings: Settings, *, assume_yes: bool = False, timeout_s: float = 600) -> Any:
    if settings.target != "local":
        raise NotImplementedError("aws device plugins: see the k8s issue")
    from .targets import local
    info = local.status(settings)
    out = LocalDevices()
    if not info.running:
        out.problems.append("the local cluster is not running. Fix: run 02_cluster")
        return out
    for n in info.nodes:
        r = n["resources"]
        g = int(r.get("GPU", 0))
        out.rows.append((n["name"], n["role"], g, int(r.get("train_slot", 0)),
                         "-" if n["role"] == "head" else ("nccl" if g else "gloo")))
    if not any(int(n["resources"].get("train_slot", 0)) for n in info.workers):
        out.problems.append("no worker node offers a train_slot")
    return out
