"""The committed notebooks are built from their text sources (``notebooks/src/NN_name.md``, MyST Markdown) by
``notebooks/build.py``: same cells, in the same order, with the same sources, tags and ids; building keeps the
outputs of unchanged cells; ``--refresh``'s normalisation. Pure: nothing is executed."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
FIX = "run `.venv/bin/python notebooks/build.py` (then `--refresh` when a code cell changed)"


def _cells(nb):
    return [(c.id, c.cell_type, c.source, c.metadata.get("tags", [])) for c in nb.cells]


def test_every_source_has_its_notebook_and_every_notebook_its_source(build):
    sources = [p.stem for p in build.source_paths()]
    notebooks = [p.stem for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))]
    assert sources == notebooks
    assert sources == ["01_capacity", "02_cluster", "03_plugins", "04_kuberay", "05_train", "06_verify",
                       "07_benchmark", "08_teardown"]  # fmt: skip


def test_the_committed_notebooks_are_built_from_their_sources(build):
    for path in build.source_paths():
        built = build.read_source(path)
        committed = nbformat.read(NOTEBOOKS / f"{path.stem}.ipynb", as_version=4)
        assert _cells(committed) == _cells(built), f"{path.stem}.ipynb differs from src/{path.name}: {FIX}"
        assert committed.metadata.kernelspec == build.KERNELSPEC, path.stem
    assert build.build(NOTEBOOKS, check=True) == [], FIX  # and byte for byte: building changes nothing


def _copy(tmp_path):
    shutil.copytree(NOTEBOOKS / "src", tmp_path / "src")
    for nb in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"):
        shutil.copy(nb, tmp_path / nb.name)
    return tmp_path


def test_an_edited_source_or_tag_is_caught_and_building_keeps_the_unchanged_outputs(build, tmp_path):
    work = _copy(tmp_path)
    source = work / "src" / "08_teardown.md"
    text = source.read_text()
    assert text.count("gone.show()\n") == 1 and text.count(":tags: [parameters]") == 1
    source.write_text(text.replace("gone.show()\n", "gone.show()  # edited\n"))
    assert build.build(work, check=True, src_dir=work / "src") == [work / "08_teardown.ipynb"]

    before = nbformat.read(work / "08_teardown.ipynb", as_version=4)
    build.build(work, src_dir=work / "src")
    after = nbformat.read(work / "08_teardown.ipynb", as_version=4)
    changed = [i for i, (a, b) in enumerate(zip(before.cells, after.cells, strict=True)) if a != b]
    assert len(changed) == 1 and after.cells[changed[0]].outputs == [] and before.cells[changed[0]].outputs
    assert build.build(work, check=True, src_dir=work / "src") == []

    source.write_text(text.replace(":tags: [parameters]\n", ""))  # a tag is part of the source too
    assert build.build(work, check=True, src_dir=work / "src") == [work / "08_teardown.ipynb"]


def test_building_from_nothing_is_valid_and_stable(build, tmp_path):
    """Into an empty folder: valid notebooks without outputs, stable cell ids, and a second build writes nothing."""
    out = tmp_path / "out"
    assert len(build.build(out)) == 8
    for path in sorted(out.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert [c.id for c in nb.cells] == [f"{path.stem.replace('_', '-')}-{i:02d}" for i in range(len(nb.cells))]
        assert all(c.outputs == [] for c in nb.cells if c.cell_type == "code")
    assert build.build(out, check=True) == []


def test_nbval_directives_are_tags_not_comments(build):
    """One way to say it: nbval reads both, and warns when a cell has both."""
    for path in build.source_paths():
        for cell in build.read_source(path).cells:
            assert "NBVAL_" not in cell.source, (path.name, cell.id)


def test_normalise_makes_an_executed_notebook_open_unmodified(build):
    """What --refresh does after papermill: the kernelspec JupyterLab would rewrite, split streams merged,
    papermill's metadata dropped, the throw-away runs folder shown as runs/ in ignored outputs, and a warning
    for a machine detail left in an output nbval compares."""
    runs = "/tmp/raytrain-refresh-x1/runs"
    ignored = new_code_cell("run = 1", metadata={"papermill": {"duration": 1.0}, "tags": [build.IGNORE_TAG]})
    ignored.outputs = [
        new_output("stream", name="stdout", text=f"storage={runs}/tutorial/storage\n"),
        new_output(
            "stream",
            name="stdout",
            text="2026-12-01 02:47:23,427\tINFO worker.py:2015 -- Connected to Ray cluster. View the dashboard at "
            "http://127.0.0.1:8266 \n(RayTrainWorker pid=7, ip=10.0.3.7) [train] step 1/8\n",
        ),
        new_output("stream", name="stdout", text="[train] step 1/8\n"),
        new_output("stream", name="stderr", text="warning\n"),
    ]
    compared = new_code_cell("run.show()")
    compared.outputs = [new_output("stream", name="stdout", text=f"job on 10.0.3.7 SUCCEEDED, {runs}/tutorial\n")]
    nb = new_notebook(
        cells=[ignored, compared],
        metadata={"papermill": {}, "kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )
    warnings = build.normalise(nb, runs)
    assert nb.metadata.kernelspec == build.KERNELSPEC and "papermill" not in nb.metadata
    assert [o["name"] for o in ignored.outputs] == ["stdout", "stderr"]
    assert ignored.outputs[0]["text"] == (
        "storage=runs/tutorial/storage\n(RayTrainWorker pid=7, ip=<node ip>) [train] step 1/8\n[train] step 1/8\n"
    )
    assert "papermill" not in ignored.metadata
    assert compared.outputs[0]["text"] == f"job on 10.0.3.7 SUCCEEDED, {runs}/tutorial\n"  # nbval compares it
    assert warnings == [
        f"cell {compared.id}: the throw-away runs folder in a compared output",
        f"cell {compared.id}: an IP address in a compared output",
    ]


def test_papermill_reads_every_parameter_of_every_notebook(repo_root, caplog):
    """``raytrain-tutorial run --list`` and papermill's inspection parse each line of the parameters cell; a line they
    cannot parse (e.g. a comment with ``=`` in it) is dropped with a warning a learner sees in every run."""
    from papermill.translators import PythonTranslator

    for path in sorted((repo_root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        assigned = [line.split("=")[0].strip() for line in cell.source.splitlines() if line and line[0].isalpha()]
        with caplog.at_level("WARNING", logger="papermill"):
            found = [p.name for p in PythonTranslator.inspect(cell)]
        assert found == assigned, (path.name, caplog.text)
