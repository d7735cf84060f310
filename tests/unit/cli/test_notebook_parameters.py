"""A real kernel through papermill: the parameters cell and papermill's injected cell decide the settings; a
notebook variable that shares a setting's name, assigned in a later cell, never reaches them."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_notebook


def test_seed_assigned_after_the_parameters_cell_does_not_leak(tmp_path, repo_root, clean_env):
    import papermill as pm

    nb = new_notebook(
        cells=[
            new_code_cell(
                "# Parameters\ntarget = None\nrun_name = None\nenv_file = None\noverride_files = None",
                metadata={"tags": ["parameters"]},
            ),
            new_code_cell("import raytrain_helpers as rt\nseed = 5\nenv = {'NCCL_DEBUG': 'x'}"),
            new_code_cell("cfg = rt.settings_from(globals())\nprint(cfg.train.steps, cfg.train.seed, cfg.nccl.env)"),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    src, out = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    nbformat.write(nb, src)
    pm.execute_notebook(
        str(src), str(out), parameters={"steps": 3, "env_file": str(repo_root / "env.yaml")}, progress_bar=False
    )
    executed = nbformat.read(out, as_version=4)
    assert executed.cells[-1].outputs[0]["text"].strip() == "3 0 {}"
