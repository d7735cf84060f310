"""A notebook's parameters cell to settings: :func:`settings_from` (``rt.settings_from(globals())``).

Only the names the parameters cells assign count, read from IPython's input history.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from .loading import load
from .settings import FLAT_FIELDS, Settings

#: How a parameters cell starts: the tutorial's own (tagged ``parameters``) and papermill's injected-parameters cell.
PARAMETERS_HEADER = "# Parameters"


#: A notebook namespace may list its parameters explicitly under this name (it wins over the input history).
PARAMS_VAR = "__raytrain_params__"


def assigned_names(source: str) -> set[str]:
    """The names a cell assigns at its top level (``a = 1``, ``a: int = 1``, ``a = b = 1``); none if not Python."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def parameter_names(namespace: Mapping[str, Any]) -> set[str] | None:
    """The names a notebook's parameters set: those of every parameters cell the kernel ran.

    A parameters cell is one whose source starts with :data:`PARAMETERS_HEADER` (the tutorial's cell tagged
    ``parameters`` and the cell papermill injects after it). They are read from IPython's input history
    (``In``), so a variable assigned in any other cell never counts. ``__raytrain_params__`` (a list of names)
    overrides the history; None: no history and no list (not a notebook), every name of ``namespace`` counts.
    """
    explicit = namespace.get(PARAMS_VAR)
    if explicit is not None:
        return {str(n) for n in explicit}
    history = namespace.get("In")
    if not isinstance(history, list) or not all(isinstance(s, str) for s in history):
        return None
    names: set[str] = set()
    for source in history:
        if source.lstrip().startswith(PARAMETERS_HEADER):
            names |= assigned_names(source)
    return names


def settings_from(namespace: Mapping[str, Any], **extra: Any) -> Settings:
    """For notebooks: build settings from the parameters cell's variables (``settings_from(globals())``).

    Only the names the parameters cells assign count (see :func:`parameter_names`): a notebook variable that
    happens to share a setting's name (``seed = 5`` in a later cell) is ignored. Outside a notebook, every name
    of ``namespace`` that is a setting counts (pass a dict of the parameters). Values that are None keep the
    env.yaml value; ``env_file`` and ``override_files`` name the files to read.
    """
    allowed = parameter_names(namespace)
    params = {
        k: v for k, v in namespace.items() if k in FLAT_FIELDS and v is not None and (allowed is None or k in allowed)
    }
    params.update({k: v for k, v in extra.items() if v is not None})
    files = namespace.get("override_files") or ()
    if isinstance(files, str):
        files = [files]
    return load(namespace.get("env_file") or None, files=files, **params)
