"""raytrain-tutorial run: order, stop at the first failure, resume, skip what is done (real papermill)."""

from __future__ import annotations

import json

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from raytrain_helpers import config as C, runner


def _nb(path, body):
    nb = new_notebook(cells=[new_code_cell("run_name = None\ntarget = None\nenv_file = None\nflavour = 'a'",
                                           metadata={"tags": ["parameters"]}),
                             new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture
def fake_notebooks(tmp_path, monkeypatch, clean_env):
    d = tmp_path / "nbs"
    d.mkdir()
    counts = tmp_path / "counts"
    counts.mkdir()
    fail = tmp_path / "fail"
    body = ("from pathlib import Path\np = Path({c!r}) / '{n}'\np.write_text(str(int(p.read_text()) + 1 "
            "if p.exists() else 1))\n")
    for name in ("01_one", "02_cluster", "03_flaky", "04_last"):
        extra = f"assert not Path({str(fail)!r}).exists(), 'flaky step failed'\n" if name == "03_flaky" else ""
        _nb(d / f"{name}.ipynb", body.format(c=str(counts), n=name) + extra)
    monkeypatch.setenv("RAYTRAIN_NOTEBOOKS_DIR", str(d))
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
    return counts, fail, tmp_path


def _counts(counts):
    return {p.name: int(p.read_text()) for p in sorted(counts.iterdir())}


def test_stop_resume_and_skip(fake_notebooks, repo_root):
    counts, fail, tmp = fake_notebooks
    s = C.load(repo_root / "env.yaml", environ={}, run_name="runner-test")
    fail.write_text("x")
    res = runner.run_notebooks(s, params={}, env_file=None, files=[])
    assert [r.status for r in res] == ["ok", "ok", "failed", "not run"]
    assert "flaky step failed" in res[2].detail
    assert _counts(counts) == {"01_one": 1, "02_cluster": 1, "03_flaky": 1}

    fail.unlink()
    res = runner.run_notebooks(s, params={}, env_file=None, files=[])
    assert [r.status for r in res] == ["skipped", "ok", "ok", "ok"]   # 02 (cluster) is re-run before resuming
    assert _counts(counts) == {"01_one": 1, "02_cluster": 2, "03_flaky": 2, "04_last": 1}

    res = runner.run_notebooks(s, params={}, env_file=None, files=[])
    assert [r.status for r in res] == ["skipped"] * 4

    res = runner.run_notebooks(s, params={"flavour": "b"}, env_file=None, files=[])   # new parameters: redo all
    assert [r.status for r in res] == ["ok"] * 4
    state = json.loads((tmp / "runs" / "runner-test" / "run_state.json").read_text())
    assert state["params"]["flavour"] == "b" and state["steps"]["04_last"]["status"] == "ok"
    executed = nbformat.read(tmp / "runs" / "runner-test" / "notebooks" / "04_last.ipynb", as_version=4)
    assert "flavour = \"b\"" in "".join(c.source for c in executed.cells)


def test_unknown_notebook_selector(fake_notebooks, repo_root):
    s = C.load(repo_root / "env.yaml", environ={}, run_name="runner-test2")
    with pytest.raises(C.ConfigError, match="no notebook matches '09'"):
        runner.run_notebooks(s, params={}, env_file=None, files=[], only=["09"])
