"""Loading the settings: env.yaml, override files, ``RAYTRAIN_*`` variables and parameters, in that precedence.

A settings file may also hold a ``target_defaults:`` block: per target value, settings that apply only when the
resolved ``target`` is that value (``target_defaults: {aws: {train: {...}}}``). They rank just below the plain
values of the same file, so any value written plainly (in that file or a later layer) wins over them. The block is
data keyed by the target's value: no code here branches on a target's name.

Every value is recorded with where it came from (:func:`sources`), so that an invalid value's message names its
field, the value, its source and the fix (:class:`.validation.ConfigError`).
"""

from __future__ import annotations

import copy
import difflib
import importlib.metadata
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import ValidationError

from .names import ENV_PREFIX, FLAT_TO_ENV_SH, field_annotation, resolve_key, type_fix
from .settings import FLAT_FIELDS, GROUPS, Settings
from .validation import ConfigError

ENV_FILE_VAR = "RAYTRAIN_ENV_FILE"
#: A settings file's block of per-target defaults (see the module docstring).
TARGET_DEFAULTS = "target_defaults"


#: RAYTRAIN_* variables that are not settings (paths and test switches).
RESERVED_ENV = {ENV_FILE_VAR, "RAYTRAIN_RUNS_DIR", "RAYTRAIN_NOTEBOOKS_DIR"}


def shared_with_others(folder: Path) -> bool:
    """A folder anyone may write into (``/tmp``, mode 1777): an env.yaml there could be anyone's."""
    try:
        return bool(folder.stat().st_mode & stat.S_IWOTH)
    except OSError:
        return True


def find_env_file(start: str | os.PathLike | None = None) -> Path | None:
    """RAYTRAIN_ENV_FILE, else the nearest env.yaml from ``start`` (the working folder) up, else the repository's.
    The search stops below a folder that others may write into (``/tmp``): a settings file planted there by another
    user would choose what the tool runs and where."""
    if os.environ.get(ENV_FILE_VAR):
        return Path(os.environ[ENV_FILE_VAR]).expanduser().resolve()
    here = Path(start or os.getcwd()).resolve()
    for d in [here, *here.parents]:
        if shared_with_others(d):
            break
        if (d / "env.yaml").is_file():
            return d / "env.yaml"
    pkg_root = Path(__file__).resolve().parent.parent
    if (pkg_root / "env.yaml").is_file():
        return pkg_root / "env.yaml"
    return None


def coerce_scalar(text: str) -> Any:
    """Environment and CLI values are strings: read them as YAML scalars (5 -> int, '1e-4' -> float)."""
    try:
        v = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(v, str) and re.match(r"^[+-]?\d+(\.\d*)?[eE][+-]?\d+$", v):
        return float(v)
    return v


def _coerce_for(group: str | None, leaf: str, raw: str) -> Any:
    """Strings from the environment or a command line, typed by the field they set (str fields stay str)."""
    ann = field_annotation(group, leaf)
    if ann is str or get_origin(ann) is Literal:
        return raw
    return coerce_scalar(raw)


def _check_type(group: str | None, leaf: str, value: Any, source: str) -> None:
    """Refuse a value of the wrong kind before validation: booleans for numbers, numbers for names."""
    ann = field_annotation(group, leaf)
    wrong = (ann in (int, float) and isinstance(value, bool)) or (ann is int and isinstance(value, float))
    wrong = wrong or (ann in (int, float) and not isinstance(value, (int, float)))
    wrong = wrong or (get_origin(ann) is list and not isinstance(value, list))
    wrong = wrong or (get_origin(ann) is dict and not isinstance(value, Mapping))
    if value is not None and wrong:
        dotted = f"{group}.{leaf}" if group else leaf
        env_sh = FLAT_TO_ENV_SH.get(leaf)
        label = f"{dotted} ({env_sh})" if env_sh else dotted
        raise ConfigError(f"{label} = {value!r} is invalid [{source}]. Fix: {type_fix(group, leaf)}")


def parse_param(key: str, value: Any, source: str = "parameter") -> tuple[str, Any]:
    """One ``-p NAME VALUE``: its flat name (what the notebooks' parameters use) and a value of the field's type.

    NAME may be flat (``steps``), dotted (``train.steps``) or the env.sh name (``STEPS``); a string VALUE is
    read as the field's type (``k8s_version 1.30`` stays the string ``"1.30"``, ``steps 20`` becomes 20).
    """
    group, leaf = resolve_key(str(key))
    if isinstance(value, str):
        value = _coerce_for(group, leaf, value)
    _check_type(group, leaf, value, f"{source} {key}")
    return leaf, value


class _Layered:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.source: dict[tuple[str | None, str], str] = {}
        self.rank: dict[tuple[str | None, str], float] = {}
        self.layer = 0
        #: (rank, target value, [((group, leaf), value, source)]) of every target_defaults block read
        self.by_target: list[tuple[float, str, list[tuple[tuple[str | None, str], Any, str]]]] = []

    def next_layer(self) -> None:
        self.layer += 1

    def set(self, group: str | None, leaf: str, value: Any, source: str, rank: float | None = None) -> None:
        _check_type(group, leaf, value, source)
        if group is None:
            self.data[leaf] = value
        else:
            self.data.setdefault(group, {})[leaf] = value
        self.source[(group, leaf)] = source
        self.rank[(group, leaf)] = self.layer if rank is None else rank

    def merge_yaml(self, doc: Any, source: str, prefix: str = "") -> None:
        if not isinstance(doc, Mapping):
            raise ConfigError(
                f"{source}: expected a mapping of settings at the top level, found {type(doc).__name__}. "
                f"Fix: write `name: value` lines, e.g. `target: local` (see the repository's env.yaml)"
            )
        for key, value in doc.items():
            if key == TARGET_DEFAULTS and not prefix:
                self._read_target_defaults(value, source)
            elif key in GROUPS:
                if not isinstance(value, Mapping):
                    leaves = ", ".join(list(Settings.model_fields[key].annotation.model_fields)[:4])
                    raise ConfigError(
                        f"{source}: {prefix}{key} must be a mapping of settings, found {value!r}. "
                        f"Fix: indent its settings under `{key}:` ({leaves}...)"
                    )
                for leaf, v in value.items():
                    if (key, leaf) not in FLAT_FIELDS.values():
                        valid = list(Settings.model_fields[key].annotation.model_fields)
                        close = difflib.get_close_matches(str(leaf), valid, n=1)
                        hint = f"did you mean {key}.{close[0]}? " if close else ""
                        raise ConfigError(
                            f"{source}: unknown setting {prefix}{key}.{leaf}. Fix: {hint}one of {', '.join(valid)}"
                        )
                    self.set(key, leaf, v, f"{source} ({prefix}{key}.{leaf})")
            else:
                try:
                    group, leaf = resolve_key(str(key))
                except ConfigError as e:
                    raise ConfigError(f"{source}: {prefix}{e}") from None
                if prefix and (group, leaf) == (None, "target"):
                    raise ConfigError(
                        f"{source}: {prefix}target: a target's defaults cannot choose the target. "
                        f"Fix: set `target:` at the top level of the file"
                    )
                self.set(group, leaf, value, f"{source} ({prefix}{key})")

    def _read_target_defaults(self, blocks: Any, source: str) -> None:
        """Check a file's ``target_defaults`` block now (every target's, so a mistake shows on any target) and keep
        its values, ranked just below this file's plain values, for :meth:`apply_target_defaults`."""
        targets = get_args(Settings.model_fields["target"].annotation)
        if not isinstance(blocks, Mapping):
            raise ConfigError(
                f"{source}: {TARGET_DEFAULTS} must map a target ({', '.join(targets)}) to its settings, found "
                f"{blocks!r}. Fix: e.g. `{TARGET_DEFAULTS}: {{aws: {{train: {{steps: 120}}}}}}`"
            )
        for name, block in blocks.items():
            if name not in targets:
                raise ConfigError(
                    f"{source}: {TARGET_DEFAULTS}.{name}: unknown target. Fix: one of {', '.join(targets)}"
                )
            scratch = _Layered()
            scratch.merge_yaml(block or {}, source, prefix=f"{TARGET_DEFAULTS}.{name}.")
            values = [
                (k, scratch.data[k[1]] if k[0] is None else scratch.data[k[0]][k[1]], src)
                for k, src in scratch.source.items()
            ]
            self.by_target.append((self.layer - 0.5, str(name), values))

    def apply_target_defaults(self) -> None:
        """The resolved target's defaults, where no value of a higher rank was written."""
        target = self.data.get("target", Settings.model_fields["target"].default)
        for rank, name, values in self.by_target:
            if name != target:
                continue
            for (group, leaf), value, src in values:
                if self.rank.get((group, leaf), -1) < rank:
                    self.set(group, leaf, value, src, rank=rank)

    def copy(self) -> _Layered:
        return copy.deepcopy(self)


def load(
    env_file: str | os.PathLike | None = None,
    *,
    files: list[str | os.PathLike] | tuple = (),
    environ: Mapping[str, str] | None = None,
    check_installed_ray: bool = True,
    **params: Any,
) -> Settings:
    """Build the settings from every source (see the module docstring for the precedence)."""
    layers = _Layered()
    path = Path(env_file).expanduser() if env_file else find_env_file()
    if path is not None:
        if path.is_dir():
            raise ConfigError(f"env file {path} is a folder. Fix: give the path of the env.yaml file inside it")
        if not path.is_file():
            raise ConfigError(
                f"env file {path} does not exist. Fix: point --env-file or {ENV_FILE_VAR} at an existing env.yaml, "
                f"or write one with `raytrain-tutorial init DIR`"
            )
        layers.next_layer()
        layers.merge_yaml(_read_yaml(path), path.name)
    for f in files or ():
        fp = Path(f).expanduser()
        if not fp.is_file():
            raise ConfigError(f"override file {fp} (-f) does not exist. Fix: give the path of an existing YAML file")
        layers.next_layer()
        layers.merge_yaml(_read_yaml(fp), fp.name)
    layers.next_layer()
    env = os.environ if environ is None else environ
    for var, raw in sorted(env.items()):
        if not var.startswith(ENV_PREFIX) or var in RESERVED_ENV:
            continue
        try:
            group, leaf = resolve_key(var)
        except ConfigError as e:
            raise ConfigError(f"environment variable {var}: {e}") from None
        layers.set(group, leaf, _coerce_for(group, leaf, raw), f"environment ({var})")
    layers.next_layer()
    for key, value in params.items():
        if value is None:
            continue
        group, leaf = resolve_key(key)
        if isinstance(value, str):
            value = _coerce_for(group, leaf, value)
        layers.set(group, leaf, value, f"parameter ({key})")
    settings = _validated(layers, path)
    if check_installed_ray:
        _check_ray_version(settings, layers)
    return settings


def _validated(base: _Layered, path: Path | None) -> Settings:
    """The settings of ``base``'s layers with the resolved target's defaults applied; ``base`` is kept (unchanged)
    so that :func:`with_overrides` can choose another target and get that target's defaults."""
    layers = base.copy()
    layers.apply_target_defaults()
    try:
        settings = Settings.model_validate(layers.data)
    except ValidationError as e:
        raise ConfigError(_explain(e, layers, path)) from None
    settings.__dict__["_sources"] = {
        f"{group}.{leaf}" if group else leaf: src for (group, leaf), src in layers.source.items()
    }
    settings.__dict__["_env_file"] = str(path) if path else None
    settings.__dict__["_layers"] = base
    return settings


def sources(settings: Settings) -> dict[str, str]:
    """Where each non-default value came from."""
    return dict(settings.__dict__.get("_sources", {}))


def loaded_env_file(settings: Settings) -> str | None:
    """The env file these settings were read from (None: defaults and overrides only)."""
    return settings.__dict__.get("_env_file")


#: PyYAML's safe loader, in C where PyYAML was built with libyaml (env.yaml: 1 ms instead of 6 ms, and every kernel,
#: command and test reads it).
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: Path) -> Any:
    """A settings file's YAML document ({} when empty); unreadable or invalid files name the fix."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (not UTF-8). Fix: give a YAML settings file") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror}). Fix: check the path and its permissions") from None
    try:
        doc = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(
            f"{path}: not valid YAML{at}: {problem}. Fix: correct the YAML syntax there (`name: value`, two-space "
            f"indents, quote values holding ':' or '#')"
        ) from None
    return {} if doc is None else doc


def _explain(err: ValidationError, layers: _Layered, path: Path | None) -> str:
    lines = []
    for e in err.errors():
        loc = [str(p) for p in e["loc"]]
        msg = e["msg"].removeprefix("Value error, ")
        if len(loc) == 1 and loc[0] in Settings.model_fields and isinstance(e.get("input"), dict):
            # a model_validator of a group: the message names the field(s) itself
            group = loc[0]
            field = next((f for f in Settings.model_fields[group].annotation.model_fields if msg.startswith(f)), None)
            where = layers.source.get((group, field), "default") if field else "env.yaml"
            if "Fix" not in msg:
                msg += f". Fix: change the {group} settings it names (`raytrain-tutorial config --names` explains each)"
            lines.append(f"{group}: {msg} [{where}]")
            continue
        if len(loc) >= 2 and loc[0] in Settings.model_fields and loc[0] not in ("target", "run_name"):
            group, leaf = loc[0], loc[1]
        else:
            group, leaf = None, loc[0]
        dotted = f"{group}.{leaf}" if group else leaf
        envname = FLAT_TO_ENV_SH.get(leaf)
        label = f"{dotted} ({envname})" if envname else dotted
        value = e.get("input")
        where = layers.source.get((group, leaf), "default")
        if e["type"] == "extra_forbidden":
            lines.append(f"{label}: unknown setting [{where}]. Fix: remove it or check the spelling")
            continue
        if "Fix" not in msg and (group, leaf) in FLAT_FIELDS.values():
            msg = f"{msg}. Fix: {type_fix(group, leaf)}"
        lines.append(f"{label} = {value!r} is invalid [{where}]: {msg}")
    head = f"invalid settings ({path.name if path else 'defaults'}):"
    return head + "\n  - " + "\n  - ".join(lines)


def installed_ray_version() -> str | None:
    """The installed Ray's version, read from its package metadata (importing Ray costs about half a CPU-second,
    in every kernel and command that loads the settings); None where Ray is not installed."""
    try:
        return importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        return None


def _check_ray_version(settings: Settings, layers: _Layered) -> None:
    installed = installed_ray_version()
    if installed is None:
        return
    if installed != settings.versions.ray_version:
        where = layers.source.get(("versions", "ray_version"), "default")
        raise ConfigError(
            f"versions.ray_version (RAY_VERSION) = {settings.versions.ray_version!r} [{where}] but the installed "
            f"Ray is {installed}: the client's Ray must equal the image's, or jobs fail in odd ways. "
            f"Fix: set ray_version: {installed} if the image really runs it, or "
            f"`pip install ray[train,default]=={settings.versions.ray_version}`"
        )


def dump_yaml(settings: Settings) -> str:
    return yaml.safe_dump(settings.public_dict(), sort_keys=False)


def with_overrides(settings: Settings, **params: Any) -> Settings:
    """A copy of ``settings`` with some flat-named values replaced (validated). For loaded settings the values are
    a new top layer, so a new ``target`` brings that target's defaults (below every value written plainly)."""
    base = settings.__dict__.get("_layers")
    if base is not None:
        layers = base.copy()
        layers.next_layer()
        for key, value in params.items():
            group, leaf = resolve_key(key)
            layers.set(group, leaf, value, f"parameter ({key})")
        env_file = loaded_env_file(settings)
        return _validated(layers, Path(env_file) if env_file else None)
    data = copy.deepcopy(settings.public_dict())
    for key, value in params.items():
        group, leaf = resolve_key(key)
        (data if group is None else data[group])[leaf] = value
    try:
        new = Settings.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_explain(e, _Layered(), None)) from None
    new.__dict__["_sources"] = sources(settings)
    new.__dict__["_env_file"] = loaded_env_file(settings)
    return new
