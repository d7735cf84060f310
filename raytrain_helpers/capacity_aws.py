"""Transition shim (removed when the redesign is complete): the module lives at ``targets.aws.capacity``
(``check`` is ``targets.aws.capacity.capacity``; the placement file helpers are in ``targets.aws.common``)."""

from .targets.aws.capacity import *  # noqa: F401,F403
from .targets.aws.capacity import (  # noqa: F401
    MAX_PROBE_AZS,
    QUOTA_CLASSES,
    SHOW_ROWS,
    AzRow,
    CapacityReport,
    InstanceFacts,
    ProbeResult,
    QuotaState,
    cancel_probe_reservations,
    cluster_private_azs,
    instance_facts,
    probe_az,
    probe_reservations,
    quota_class,
    quota_limit,
    spot_scores,
    vcpus_in_use,
)
from .targets.aws.capacity import capacity as check  # noqa: F401
from .targets.aws.common import load_placement, placement_path  # noqa: F401
