"""Step 04 (placeholder for the local target until the k8s issue lands)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import Settings


@dataclass
class LocalKubeRay:
    ok: bool = True
    lines: list[str] = field(default_factory=list)

    def show(self) -> None:
        print("\n".join(self.lines))


def step(settings: Settings, *, assume_yes: bool = False, timeout_s: float = 900):
    if settings.target != "local":
        raise NotImplementedError("aws KubeRay: see the k8s issue")
    from .targets import local
    info = local.status(settings)
    return LocalKubeRay(ok=info.ok, lines=[f"local stand-in for the RayCluster: {len(info.workers)} worker node(s)"])
