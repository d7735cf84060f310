"""Transition shim (removed when the redesign is complete): the plugin values live at ``plan.plugins``, the aws
step at ``targets.aws.plugins``, the local stand-in at ``targets.local_standin``."""

from .plan.plugins import *  # noqa: F401,F403
from .targets import for_settings, local_standin
from .targets.aws import plugins as aws_plugins
from .targets.aws.plugins import *  # noqa: F401,F403
from .targets.kube_results import PluginsResult  # noqa: F401


def _is_local(settings) -> bool:
    return for_settings(settings).NAME == "local"


def step(settings, *, assume_yes=False, **options):
    if _is_local(settings):
        return local_standin.devices(settings, assume_yes=assume_yes)
    return aws_plugins.devices(settings, assume_yes=assume_yes, **options)


def status(settings, **options):
    if _is_local(settings):
        return local_standin.devices_status(settings)
    return aws_plugins.status(settings, **options)


def teardown(settings, assume_yes=False, **options):
    if _is_local(settings):
        return local_standin.devices_teardown(settings)
    return aws_plugins.teardown(settings, assume_yes, **options)
