"""Transition shim (removed when the redesign is complete): plan.memory and targets.local.capacity."""
from .plan.memory import *  # noqa: F401,F403
from .plan.memory import GIB, MemoryPlan, aws_plan, count_params, memory_plan, plan_for, seed_figure_check, seed_plan  # noqa: F401
from .targets.local.resources import *  # noqa: F401,F403
from .targets.local.resources import LocalCapacity, _mem_available_gib, _visible_gpus, local_resources, local_world_size, resolve_local_gpus  # noqa: F401


def check(settings, *, probe=False, assume_yes=False, regions=None):
    from .targets import for_settings

    return for_settings(settings).capacity(settings, probe=probe, assume_yes=assume_yes, regions=regions)
