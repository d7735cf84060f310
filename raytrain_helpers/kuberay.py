"""Transition shim (removed when the redesign is complete): the RayCluster values and checks live at
``plan.raycluster``, the aws step at ``targets.aws.kuberay``, the local stand-in at ``targets.local_standin``."""

from .core.constants import TRAIN_SLOT  # noqa: F401
from .plan.raycluster import *  # noqa: F401,F403
from .targets import for_settings, local_standin
from .targets.aws import kuberay as aws_kuberay
from .targets.aws.kuberay import *  # noqa: F401,F403
from .targets.kube_results import KubeRayResult  # noqa: F401


def _is_local(settings) -> bool:
    return for_settings(settings).NAME == "local"


def step(settings, *, assume_yes=False, **options):
    if _is_local(settings):
        return local_standin.raycluster(settings, assume_yes=assume_yes)
    return aws_kuberay.raycluster(settings, assume_yes=assume_yes, **options)


def status(settings, **options):
    if _is_local(settings):
        return local_standin.raycluster_status(settings)
    return aws_kuberay.status(settings, **options)


def teardown(settings, assume_yes=False, **options):
    if _is_local(settings):
        return local_standin.raycluster_teardown(settings)
    return aws_kuberay.teardown(settings, assume_yes, **options)


def job_server(settings, **options):
    if _is_local(settings):
        return for_settings(settings).job_server(settings)
    return aws_kuberay.job_server(settings, **options)
