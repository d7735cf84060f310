"""Transition shim (removed when the redesign is complete): the API client lives at ``clients.kubernetes``, the
facts read from objects at ``plan.kube_objects``."""

from .clients.kubernetes import *  # noqa: F401,F403
from .plan.kube_objects import *  # noqa: F401,F403
