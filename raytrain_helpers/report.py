"""Transition shim (removed when the redesign is complete): core.tables, core.criteria, steps.verify/benchmark."""
from .core.criteria import FAIL, NA, PASS, Criteria, Criterion  # noqa: F401
from .core.tables import format_table, human_bytes, table  # noqa: F401
from .steps.benchmark import BenchComparison, compare as compare_benchmark, comparison_text as cmp_text  # noqa: F401
from .steps.overview import describe  # noqa: F401
from .steps.verify import Verification, audit_run, success_ranks, verify, worker_logs as collect_worker_logs  # noqa: F401
from .steps.verify import run as verify_run  # noqa: F401
