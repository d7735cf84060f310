"""Transition: delegates to the old module."""
from .. import runner as _m


def register(sub):
    _m.register_cli(sub)
