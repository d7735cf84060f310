"""The presentation kit: what the notebooks show beside each step (the real artifacts, the commands behind them,
live views and forms).

Every function here returns (or prints) plain text that depends only on the settings and the package's code, so
a notebook executed headless (papermill, nbval) stores the same text on every run. In an interactive kernel
whose front end renders widgets (JupyterLab, Notebook 7), the same objects add a rich rendering: HTML beside an
identical ``text/plain``, a live loss view with a ``tqdm.auto`` bar, a settings form.

* :func:`show_source`: a function of the package, numbered as in its file (it cannot drift from the code).
* :func:`show_manifest`: one manifest rendered from the settings (eksctl, device plugins, RayCluster...).
* :func:`equivalent_commands`: the aws / eksctl / helm / kubectl / ray commands a step stands for.
* :func:`cost_note`: the stack's hourly cost on aws, from the package's price table.
* :func:`criteria_view`: 06's criteria as a table at most :data:`MAX_WIDTH` characters wide (coloured in HTML).
* :func:`show_nccl_lines`: the NCCL log lines the transport audit based its verdict on.
* :func:`live_view`: ``update(metrics)`` / ``close()`` for the training step's progress.
* :func:`settings_form`: edit the run's override file, validated by :mod:`core.config`.
* :mod:`.pictures`: the pictures drawn from the learner's run (an FSDP step, the cluster, memory, losses).

Modules: :mod:`.shown` (the output object, front-end detection), :mod:`.source`, :mod:`.manifest_view`,
:mod:`.commands`, :mod:`.reports` (cost, criteria, NCCL lines), :mod:`.live`, :mod:`.form`. The notebooks reach
these names as ``rt.steps.display.<name>``. :data:`.shown.FORCE_INTERACTIVE` forces the front-end detection
(tests, or a front end it does not know).
"""

from __future__ import annotations

from ..core.tables import MAX_WIDTH, wrapped_table
from .commands import STEP_COMMANDS, equivalent_commands, target_name
from .form import (
    DEFAULT_OVERRIDE_FILE,
    FORM_FIELDS,
    SettingsForm,
    read_overrides,
    save_overrides,
    settings_form,
    settings_table,
    validate_overrides,
)
from .live import LiveView, QuietView, live_view, metrics_line
from .manifest_view import LIST_LIMIT, MANIFEST_NAMES, abridge, placeholder_azs, show_manifest
from .reports import CRITERIA_WIDTHS, STATUS_COLOURS, cost_note, criteria_rows, criteria_view, show_nccl_lines
from .shown import FRONTEND_METADATA_KEYS, Shown, fit, interactive_frontend
from .source import code_lines, key_lines, resolve, show_source

__all__ = [
    "CRITERIA_WIDTHS",
    "DEFAULT_OVERRIDE_FILE",
    "FORM_FIELDS",
    "FRONTEND_METADATA_KEYS",
    "LIST_LIMIT",
    "MANIFEST_NAMES",
    "MAX_WIDTH",
    "STATUS_COLOURS",
    "STEP_COMMANDS",
    "LiveView",
    "QuietView",
    "SettingsForm",
    "Shown",
    "abridge",
    "code_lines",
    "cost_note",
    "criteria_rows",
    "criteria_view",
    "equivalent_commands",
    "fit",
    "interactive_frontend",
    "key_lines",
    "live_view",
    "metrics_line",
    "placeholder_azs",
    "read_overrides",
    "resolve",
    "save_overrides",
    "settings_form",
    "settings_table",
    "show_manifest",
    "show_nccl_lines",
    "show_source",
    "target_name",
    "validate_overrides",
    "wrapped_table",
]
