"""Transition shim (removed when the redesign is complete): the module lives at ``core.config``."""
import sys

from .core import config as _moved

sys.modules[__name__] = _moved
