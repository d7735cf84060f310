"""One typed settings object for the whole tutorial.

Sources, lowest precedence first:

1. the defaults of the schema (:mod:`.settings`),
2. ``env.yaml`` (found in the working directory or its parents, or ``RAYTRAIN_ENV_FILE``),
3. override files (``raytrain-tutorial run -f extra.yaml``, ``load(files=[...])``), in order,
4. environment variables ``RAYTRAIN_<NAME>`` where NAME is the reference sample's env.sh name
   (``RAYTRAIN_GPU_NODE_COUNT=4``, ``RAYTRAIN_STEPS=20``) or the upper-cased flat name of any other
   setting (``RAYTRAIN_TARGET=aws``, ``RAYTRAIN_MODEL_PRESET=qwen2.5-1.5b``),
5. explicit parameters: papermill ``-p name value``, CLI ``-p name value``, ``load(steps=3)``.

Every setting has a unique flat name (``steps``, ``gpu_node_count``...) usable at every level, and a
dotted name (``train.steps``) usable in YAML files. Invalid values raise :class:`ConfigError` naming
the field, the bad value, where it came from, and the fix.

The pieces live beside this module, by what a reader looks for; this module re-exports the names the package,
the notebooks and the tests use:

- :mod:`.settings`: the schema (the groups of env.yaml, a docstring per field, their validators), :data:`FLAT_FIELDS`;
- :mod:`.presets`: the model presets and the GPU instance types the tutorial knows offline;
- :mod:`.validation`: the rules a value must satisfy and :class:`ConfigError`;
- :mod:`.names`: flat, dotted, env.sh and ``RAYTRAIN_*`` names, :func:`field_docs` for ``config --markdown``;
- :mod:`.loading`: env.yaml, override files, environment, parameters, precedence and where each value came from;
- :mod:`.parameters`: :func:`settings_from`, a notebook's parameters cell to settings.
"""

from __future__ import annotations

from .loading import (
    ENV_FILE_VAR,
    RESERVED_ENV,
    SAFE_LOADER,
    coerce_scalar,
    dump_yaml,
    find_env_file,
    installed_ray_version,
    load,
    loaded_env_file,
    parse_param,
    sources,
    with_overrides,
)
from .names import (
    ENV_PREFIX,
    ENV_SH_NAMES,
    FLAT_TO_ENV_SH,
    FieldDoc,
    env_var_name,
    field_annotation,
    field_docs,
    resolve_key,
    type_fix,
)
from .parameters import PARAMETERS_HEADER, PARAMS_VAR, assigned_names, parameter_names, settings_from
from .presets import INSTANCE_TYPES, PRESETS
from .settings import (
    FLAT_FIELDS,
    GROUPS,
    AwsSettings,
    KubernetesSettings,
    LocalSettings,
    NcclSettings,
    Settings,
    TrainSettings,
    VersionSettings,
)
from .validation import (
    BUCKET_RE,
    DNS1123_LABEL,
    REGION_RE,
    RESERVATION_RE,
    RUN_NAME_RE,
    ConfigError,
    known_regions,
)

__all__ = [
    "AwsSettings",
    "BUCKET_RE",
    "ConfigError",
    "DNS1123_LABEL",
    "ENV_FILE_VAR",
    "ENV_PREFIX",
    "ENV_SH_NAMES",
    "FLAT_FIELDS",
    "FLAT_TO_ENV_SH",
    "FieldDoc",
    "GROUPS",
    "INSTANCE_TYPES",
    "KubernetesSettings",
    "LocalSettings",
    "NcclSettings",
    "PARAMETERS_HEADER",
    "PARAMS_VAR",
    "PRESETS",
    "REGION_RE",
    "RESERVATION_RE",
    "RESERVED_ENV",
    "RUN_NAME_RE",
    "SAFE_LOADER",
    "Settings",
    "TrainSettings",
    "VersionSettings",
    "assigned_names",
    "coerce_scalar",
    "dump_yaml",
    "env_var_name",
    "field_annotation",
    "field_docs",
    "find_env_file",
    "installed_ray_version",
    "known_regions",
    "load",
    "loaded_env_file",
    "parameter_names",
    "parse_param",
    "resolve_key",
    "settings_from",
    "sources",
    "type_fix",
    "with_overrides",
]
