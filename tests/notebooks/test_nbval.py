"""nbval over every committed notebook (they re-execute on a real local Ray cluster and their outputs must
match the committed ones, modulo tests/notebooks/sanitize.cfg), and proof that this harness can fail."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SANITIZE = REPO / "tests" / "notebooks" / "sanitize.cfg"
pytestmark = pytest.mark.notebooks


def _nbval(paths, tmp_path, timeout=1500):
    env = dict(os.environ, RAYTRAIN_RUNS_DIR=str(tmp_path / "runs"), PYTHONUNBUFFERED="1")
    # nothing of the caller's settings or of another cluster's token: the notebooks run on env.yaml alone
    env = {k: v for k, v in env.items() if not k.startswith(("RAYTRAIN_", "RAY_AUTH_")) or k == "RAYTRAIN_RUNS_DIR"}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "--nbval",
        "--nbval-current-env",
        "--nbval-cell-timeout",
        "900",
        "--nbval-sanitize-with",
        str(SANITIZE),
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(tmp_path),
        "-o",
        "addopts=",
        *map(str, paths),
    ]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def _first_failure(out: str) -> str:
    """What a reader needs when nbval fails: the list of failed cells and the first failure in full (a later
    failure is usually a consequence of the first), not the tail."""
    failed = [line for line in out.splitlines() if line.startswith("FAILED ")]
    blocks = re.split(r"\n_{3,} .* _{3,}\n", out, maxsplit=2)
    first = blocks[1] if len(blocks) > 1 else out
    if len(first) > 5000:  # the cell's source is at the top, the exception at the bottom
        first = first[:1500] + "\n[...]\n" + first[-3500:]
    return "\n".join([*failed[:30], "--- first failure ---", first])


def test_committed_notebooks_reproduce_their_outputs(tmp_path):
    notebooks = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert [p.stem[:2] for p in notebooks] == ["01", "02", "03", "04", "05", "06", "07", "08"]
    r = _nbval(notebooks, tmp_path)
    assert r.returncode == 0, _first_failure(r.stdout + r.stderr)
    assert " passed" in r.stdout and " failed" not in r.stdout


def test_the_harness_fails_on_a_wrong_output(tmp_path):
    r = _nbval([REPO / "tests" / "notebooks" / "failing" / "must_fail.ipynb"], tmp_path, timeout=300)
    assert r.returncode != 0
    assert "1 failed" in r.stdout and "41" in r.stdout and "42" in r.stdout


def test_a_changed_verdict_in_a_real_notebook_is_caught(tmp_path):
    """The sanitizers hide numbers and ids, not words: flip one verdict in 01's stored output."""
    src = REPO / "notebooks" / "01_capacity.ipynb"
    nb = json.loads(src.read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code" and "cap.show()" in "".join(c["source"]))
    out = next(o for o in cell["outputs"] if o.get("name") == "stdout")
    text = "".join(out["text"])
    assert "capacity: OK" in text
    out["text"] = text.replace("capacity: OK", "capacity: NOT ENOUGH")
    dst = tmp_path / "nb" / "01_capacity.ipynb"
    dst.parent.mkdir()
    dst.write_text(json.dumps(nb))
    shutil.copy(REPO / "env.yaml", tmp_path / "env.yaml")  # found upwards from the notebook's folder
    r = _nbval([dst], tmp_path, timeout=300)
    assert r.returncode != 0, r.stdout[-3000:]
    assert "capacity: NOT ENOUGH" in r.stdout
