"""Transition shim (removed when the redesign is complete): the module lives at ``plan.cost``."""

import sys

from .plan import cost as _moved

sys.modules[__name__] = _moved
