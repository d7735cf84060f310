"""settings_from(globals()): only the names the parameters cells assign count (pure: a namespace with IPython's
input history ``In``, as a notebook kernel has it)."""

from __future__ import annotations

import pytest

from raytrain_helpers.core import parameters

PARAMS_CELL = "# Parameters (papermill -p NAME VALUE)\ntarget = None\nrun_name = None\nenv_file = None\nsteps = None"
INJECTED = "# Parameters\nsteps = 3\nseq_len = 64\n"


@pytest.fixture
def env(repo_root, clean_env):
    return str(repo_root / "env.yaml")


def test_a_later_notebook_variable_with_a_setting_name_does_not_leak(env):
    ns = {
        "In": ["", PARAMS_CELL, INJECTED, "import raytrain_helpers as rt", "seed = 5\ndebug = 'WARN'"],
        "target": None,
        "run_name": None,
        "env_file": env,
        "steps": 3,
        "seq_len": 64,
        "seed": 5,
        "debug": "WARN",
    }
    assert parameters.parameter_names(ns) == {"target", "run_name", "env_file", "steps", "seq_len"}
    s = parameters.settings_from(ns)
    assert (s.train.steps, s.train.seq_len) == (3, 64)  # the injected parameters count
    assert (s.train.seed, s.nccl.debug) == (0, "INFO")  # the later cell's variables do not


def test_an_explicit_list_wins_and_a_plain_mapping_is_all_parameters(env):
    ns = {"In": ["", PARAMS_CELL], "steps": 4, "seed": 5, "env_file": env, "__raytrain_params__": ["seed"]}
    s = parameters.settings_from(ns)
    assert (s.train.steps, s.train.seed) == (80, 5)  # steps from env.yaml: only seed is a parameter
    s = parameters.settings_from({"steps": 4, "seed": 5, "env_file": env})  # no input history: a dict of parameters
    assert (s.train.steps, s.train.seed) == (4, 5)


@pytest.mark.parametrize(
    "source, names",
    [
        ("a = 1\nb: int = 2\nc = d = 3\nx.y = 4\nfor i in []: pass", {"a", "b", "c", "d"}),
        ("not python (", set()),
    ],
)
def test_assigned_names(source, names):
    assert parameters.assigned_names(source) == names


def test_every_notebook_parameters_cell_starts_with_the_header(repo_root):
    """settings_from finds the parameters cells by their first line: the committed notebooks must keep it."""
    import json

    for path in sorted((repo_root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        (params,) = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert "".join(params["source"]).startswith(parameters.PARAMETERS_HEADER), path.name
