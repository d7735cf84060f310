"""Transition: delegates to the old module."""
from ..targets import local as _m


def register(sub):
    _m.register_cli(sub)
