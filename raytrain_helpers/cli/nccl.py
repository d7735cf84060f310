"""Transition: delegates to the old module."""
from .. import nccl as _m


def register(sub):
    _m.register_cli(sub)
