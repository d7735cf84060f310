"""Transition shim (removed when the redesign is complete): the module lives at ``cli.runner``."""

import sys

from .cli import runner as _moved

sys.modules[__name__] = _moved
