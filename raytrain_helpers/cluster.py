"""Step 02: the cluster. ``local`` starts real Ray raylets here; ``aws`` creates EKS (eksctl)."""

from __future__ import annotations

from .config import Settings


def step(settings: Settings, action: str = "up", *, assume_yes: bool = False):
    """Notebook 02's entry point: action is up | status | down | plan."""
    if settings.target == "local":
        from .targets import local
        if action in ("up", "plan"):
            return local.up(settings, plan=(action == "plan"))
        if action == "status":
            return local.status(settings)
        if action == "down":
            return local.down(settings)
        raise ValueError(f"unknown action {action!r}: use up, status, down or plan")
    raise NotImplementedError("the aws target of step 02 is delivered by the AWS issue (EKS cluster)")
