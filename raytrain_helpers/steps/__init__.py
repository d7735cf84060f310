"""One module per notebook, each target-agnostic: it calls the target ``targets.for_settings`` hands it.

01 capacity · 02 cluster · 03 plugins · 04 kuberay · 05 transport (the check before) and train · 06 verify (and
completions: the model's before/after table) · 07 benchmark · 08 teardown · pictures: 05 and 07's, from the run
"""

from . import (
    benchmark,
    capacity,
    cluster,
    completions,
    display,
    documents,
    evidence,
    kuberay,
    observe,
    overview,
    pictures,
    plugins,
    teardown,
    train,
    transport,
    verify,
)
from .overview import describe

__all__ = [
    "benchmark",
    "capacity",
    "cluster",
    "completions",
    "describe",
    "display",
    "evidence",
    "observe",
    "documents",
    "kuberay",
    "overview",
    "pictures",
    "plugins",
    "teardown",
    "train",
    "transport",
    "verify",
]
