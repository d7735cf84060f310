"""Transition shim (removed when the redesign is complete): steps.train, steps.benchmark, clients.rayjobs."""
from .clients.rayjobs import *  # noqa: F401,F403
from .clients.rayjobs import JobRun, auth_headers, find_active, parse_result, parse_steps, parse_summary  # noqa: F401
from .core.constants import RESULT_PREFIX  # noqa: F401
from .core.paths import PACKAGE_DIR as PKG_DIR, run_dir, runs_dir  # noqa: F401
from .steps.benchmark import BenchRun, plot as plot_benchmark, run as benchmark  # noqa: F401
from .steps.train import *  # noqa: F401,F403
from .steps.train import job_config, live_status, load_last, plot_loss, stage_working_dir, storage_path, submit, worker_env  # noqa: F401


def job_server(settings):
    from .targets import for_settings

    return for_settings(settings).job_server(settings)


def default_variants(settings):
    from .targets import for_settings

    return for_settings(settings).benchmark_variants(settings)
