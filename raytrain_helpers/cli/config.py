"""Transition: delegates to the old module."""
from .. import config_cli as _m


def register(sub):
    _m.register_cli(sub)
