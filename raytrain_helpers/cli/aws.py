"""Transition: delegates to the old modules."""
from .. import capacity_aws, cluster


def register(sub):
    capacity_aws.register_cli(sub)
    cluster.register_cli(sub)
