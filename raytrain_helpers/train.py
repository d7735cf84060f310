"""Transition shim (removed when the redesign is complete): the module lives at ``worker.train``."""
import sys

from .worker import train as _moved

sys.modules[__name__] = _moved
