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


class TeardownResult:
    def __init__(self, steps: list[tuple[str, bool, str]]):
        self.steps = steps

    @property
    def ok(self) -> bool:
        return all(ok for _, ok, _ in self.steps)

    def show(self) -> None:
        from .report import table
        table([(name, "gone" if ok else "LEFT", ev) for name, ok, ev in self.steps], ["what", "state", "evidence"],
              title="teardown (reverse order)", max_width=90)


def teardown(settings: Settings, *, assume_yes: bool = False) -> TeardownResult:
    """Notebook 08's entry point: remove everything in reverse order, verified by listing."""
    if settings.target == "local":
        from .targets import local
        info = local.down(settings)
        left = local._our_pids(settings)
        return TeardownResult([("local Ray cluster (head + worker raylets)", not info.running and not left,
                                f"{info.message}; {len(left)} process(es) left")])
    raise NotImplementedError("the aws teardown is delivered by the AWS issues")
