"""Transition shim (removed when the redesign is complete): the module lives at ``worker.entrypoint``."""
import sys

from .worker import entrypoint as _moved

sys.modules[__name__] = _moved
