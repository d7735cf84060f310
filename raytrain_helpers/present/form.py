"""The settings form of 01: edit the run's override file, validated by :mod:`core.config` before it is saved
(:func:`settings_form`; without a widget front end, the table of the settings and where each comes from).
"""

from __future__ import annotations

import html
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

from ..core import config
from ..core.settings import Settings
from ..core.tables import wrapped_table
from ..core.validation import ConfigError
from .shown import Shown, interactive_frontend, pre_html

#: The settings the form offers (flat names), most often changed first.
FORM_FIELDS = (
    "target",
    "run_name",
    "model_preset",
    "steps",
    "seq_len",
    "batch_size",
    "learning_rate",
    "num_workers",
    "checkpoint_every",
    "region",
    "gpu_node_type",
    "gpu_node_count",
    "gpu_az",
    "storage_path",
)


def read_overrides(path: str | Path) -> dict[str, Any]:
    """The flat-named settings an override file sets ({} when it does not exist); dotted keys are flattened."""
    p = Path(path)
    if not p.is_file():
        return {}
    doc = yaml.safe_load(p.read_text()) or {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{p}: expected `name: value` lines. Fix: rewrite it or delete it")
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, dict) and key in config.GROUPS:
            out.update({leaf: v for leaf, v in value.items()})
        else:
            out[config.resolve_key(str(key))[1]] = value
    return out


def validate_overrides(path: str | Path, values: dict[str, Any], env_file: str | None = None) -> list[str]:
    """Problems (one line each, naming the field and the fix) of ``values`` written as ``path``; [] = valid.

    The values are written to a file of the same name in a temporary folder and loaded exactly as
    ``override_files`` would load them, so the messages are :mod:`core.config`'s own.
    """
    with tempfile.TemporaryDirectory(prefix="raytrain-form-") as tmp:
        trial = Path(tmp) / Path(path).name
        trial.write_text(yaml.safe_dump(values, sort_keys=False))
        try:
            config.load(env_file, files=[trial])
        except ConfigError as e:
            lines = [line.strip().removeprefix("- ") for line in str(e).splitlines()]
            return [line for line in lines if line and not line.startswith("invalid settings")] or [str(e)]
    return []


def save_overrides(path: str | Path, values: dict[str, Any], env_file: str | None = None) -> list[str]:
    """Validate, then write ``values`` to ``path`` (only when valid); returns the problems ([] = saved)."""
    problems = validate_overrides(path, values, env_file)
    if not problems:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        header = "# Overrides of env.yaml for this run (written by the settings form; edit freely).\n"
        p.write_text(header + yaml.safe_dump(values, sort_keys=False))
    return problems


def settings_table(settings: Settings, path: str | Path) -> Shown:
    """The form's settings: value and where it comes from (the text shown without a widget front end)."""
    flat, where = settings.flat(), config.sources(settings)
    dotted = {leaf: f"{group}.{leaf}" if group else leaf for leaf, (group, _) in config.FLAT_FIELDS.items()}
    rows = [(name, _short(flat[name]), where.get(dotted[name], "default")) for name in FORM_FIELDS if name in flat]
    exists = Path(path).is_file()
    title = f"settings of this run (override file {path}: {'present' if exists else 'none yet'})"
    # "from" is the widest: a target's default reads e.g. env.yaml (target_defaults.local.train.checkpoint_every)
    text = wrapped_table(rows, ["setting", "value", "from"], (18, 24, 58), title=title)
    return Shown(text, pre_html(text))


def _short(value: Any) -> str:
    return '""' if value == "" else str(value)


#: The override file the settings form writes when the run names none.
DEFAULT_OVERRIDE_FILE = "my-settings.yaml"


def settings_form(
    path: str | Path | Sequence[str] | None, settings: Settings | None = None, *, interactive: bool | None = None
) -> Any:
    """A form over :data:`FORM_FIELDS` that writes ``path`` (an override file: the notebook's ``override_files``,
    its first one when several, or :data:`DEFAULT_OVERRIDE_FILE` when None) after validating it; errors show next
    to their field. Without a widget front end: the settings table (:func:`settings_table`)."""
    if path is None or (not isinstance(path, (str, Path)) and not path):
        path = DEFAULT_OVERRIDE_FILE
    elif not isinstance(path, (str, Path)):
        path = list(path)[0]
    settings = settings or config.load()
    if not interactive_frontend(interactive):
        return settings_table(settings, path)
    return SettingsForm(path, settings).box


class SettingsForm:
    """The ipywidgets form of :func:`settings_form`."""

    def __init__(self, path: str | Path, settings: Settings):
        import ipywidgets

        self.path, self.settings = Path(path), settings
        self.env_file = config.loaded_env_file(settings)
        current = {**settings.flat(), **read_overrides(path)}
        self.inputs: dict[str, Any] = {}
        self.errors: dict[str, Any] = {}
        rows = []
        for name in FORM_FIELDS:
            widget = _input_widget(ipywidgets, name, current.get(name))
            self.inputs[name] = widget
            self.errors[name] = ipywidgets.HTML("")
            rows.append(ipywidgets.HBox([widget, self.errors[name]]))
        self.status = ipywidgets.HTML(f"override file: <code>{html.escape(str(self.path))}</code>")
        button = ipywidgets.Button(description="validate and save", button_style="primary")
        button.on_click(lambda _button: self.save())
        self.box = ipywidgets.VBox([*rows, button, self.status])
        self.box.add_class("raytrain-settings-form")

    def values(self) -> dict[str, Any]:
        """The fields whose value differs from the settings without the file (what the file must hold)."""
        base = self.settings.flat()
        out = {}
        for name, widget in self.inputs.items():
            value = widget.value
            if isinstance(base.get(name), int) and not isinstance(base.get(name), bool) and isinstance(value, str):
                value = config.coerce_scalar(value)
            if value != base.get(name):
                out[name] = value
        return out

    def save(self) -> list[str]:
        problems = save_overrides(self.path, self.values(), self.env_file)
        for name, label in self.errors.items():
            mine = [p for p in problems if _names_field(p, name)]
            label.value = "".join(f'<span style="color:#cf222e">{html.escape(p)}</span><br>' for p in mine)
        if problems:
            self.status.value = "<span style='color:#cf222e'>not saved: " + "<br>".join(map(html.escape, problems))
        else:
            self.status.value = (
                f"saved <code>{html.escape(str(self.path))}</code>: set <code>override_files = "
                f"'{html.escape(str(self.path))}'</code> in the parameters cell, then run the notebook again"
            )
        return problems


def _names_field(problem: str, name: str) -> bool:
    head = problem.split(" ", 1)[0].split("=")[0]
    return head == name or head.endswith(f".{name}") or f"({name})" in problem.split(":")[0]


def _input_widget(ipywidgets, name: str, value: Any):
    group, leaf = config.FLAT_FIELDS[name]
    annotation = config.field_annotation(group, leaf)
    choices = [str(a) for a in get_args(annotation)] if get_origin(annotation) is Literal else []
    if name == "model_preset":
        choices = list(config.PRESETS)
    style = {"description_width": "140px"}
    layout = ipywidgets.Layout(width="420px")
    if choices and str(value) in choices:
        return ipywidgets.Dropdown(options=choices, value=str(value), description=name, style=style, layout=layout)
    if isinstance(value, bool):
        return ipywidgets.Checkbox(value=value, description=name, style=style)
    if isinstance(value, int):
        return ipywidgets.IntText(value=value, description=name, style=style, layout=layout)
    if isinstance(value, float):
        return ipywidgets.FloatText(value=value, description=name, style=style, layout=layout)
    return ipywidgets.Text(value=str(value), description=name, style=style, layout=layout)
