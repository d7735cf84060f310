"""Builds the tutorial notebooks (``notebooks/NN_name.ipynb``) from their text sources (``notebooks/src/NN_name.md``).

Each notebook is written as MyST Markdown that jupytext reads: prose as prose, code as ``{code-cell} ipython3``
blocks, cell tags as the block's ``:tags:`` (``parameters`` for papermill, ``nbval-ignore-output`` for nbval). The
committed ``.ipynb`` carry outputs (nbval checks them against a fresh execution); building keeps a cell's outputs
while its source is unchanged and drops them where it changed, so a changed cell must be executed again (--refresh).

    python notebooks/build.py              # notebooks/src/*.md -> notebooks/*.ipynb, outputs kept where unchanged
    python notebooks/build.py --check      # exit 1 when a committed notebook differs from its source
    python notebooks/build.py --out DIR    # build into DIR instead (no outputs unless DIR has notebooks)
    python notebooks/build.py --refresh    # build notebooks/, then execute them in place and normalise

``--refresh`` executes every notebook in order on the local target, exactly as nbval will (no injected
parameters), then normalises what JupyterLab and git would otherwise see change (kernelspec, split streams,
papermill's metadata, temporary paths in the outputs nbval ignores).
"""

from __future__ import annotations

import difflib
import re
import sys
import tempfile
from pathlib import Path

import jupytext
import nbformat
from nbformat.v4 import new_notebook

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SOURCES = HERE / "src"
#: jupytext's name for the MyST Markdown notebook format.
FORMAT = "md:myst"

#: What `jupyter kernelspec list` shows for ipykernel's default kernel: JupyterLab rewrites the notebook's
#: kernelspec to this on opening, so any other display_name makes every notebook open as modified.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
#: nbval's cell tag for "execute, but do not compare the outputs" (nbval/plugin.py: metadata_tags).
IGNORE_TAG = "nbval-ignore-output"


def source_paths(src_dir: Path = SOURCES) -> list[Path]:
    """The notebooks' text sources, in order."""
    return sorted(src_dir.glob("[0-9][0-9]_*.md"))


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def read_source(path: Path) -> nbformat.NotebookNode:
    """A notebook as its text source says, without outputs. Cell ids are stable (``<stem>-<index>``) and every
    cell carries a ``tags`` list (papermill writes one on each cell it executes), so building twice changes nothing."""
    text_nb = jupytext.read(path, fmt=FORMAT)
    stem = path.stem.replace("_", "-")
    cells = []
    for index, cell in enumerate(text_nb.cells):
        cell.metadata = {**cell.metadata, "tags": tags(cell)}
        cell["id"] = f"{stem}-{index:02d}"
        cells.append(cell)
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def merge(built: nbformat.NotebookNode, committed: nbformat.NotebookNode | None) -> list[str]:
    """Carry the committed notebook's outputs (and execution counts, notebook metadata) over to every built cell
    whose type and source are unchanged; returns the ids of the code cells that now need executing."""
    if committed is not None:
        built.metadata = {**committed.metadata, "kernelspec": dict(KERNELSPEC)}
        built.metadata.pop("jupytext", None)
        old = [(c.cell_type, c.source) for c in committed.cells]
        new = [(c.cell_type, c.source) for c in built.cells]
        matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
        for block in matcher.get_matching_blocks():
            for i in range(block.size):
                before, after = committed.cells[block.a + i], built.cells[block.b + i]
                after.metadata = {**before.metadata, **after.metadata}
                if after.cell_type == "code":
                    after.outputs = before.get("outputs", [])
                    after.execution_count = before.get("execution_count")
    return [c.id for c in built.cells if c.cell_type == "code" and c.execution_count is None]


def build_one(path: Path, out_dir: Path) -> tuple[Path, nbformat.NotebookNode, bool, list[str]]:
    """Build one notebook for ``out_dir``: its path there, the notebook, whether it differs from what is there, and
    its code cells without outputs. Writes nothing (see :func:`build`)."""
    target = out_dir / f"{path.stem}.ipynb"
    committed = nbformat.read(target, as_version=4) if target.exists() else None
    nb = read_source(path)
    unexecuted = merge(nb, committed)
    nbformat.validate(nb)
    text = nbformat.writes(nb) + "\n"
    changed = not target.exists() or target.read_text() != text
    return target, nb, changed, unexecuted


def build(out_dir: Path = HERE, *, check: bool = False, src_dir: Path = SOURCES) -> list[Path]:
    """Build every notebook from its source into ``out_dir``; returns the paths that differ(ed) from their source.
    With ``check`` nothing is written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sources = source_paths(src_dir)
    if not sources:
        raise FileNotFoundError(f"no notebook sources (NN_name.md) in {src_dir}")
    differ = []
    for path in sources:
        target, nb, changed, unexecuted = build_one(path, out_dir)
        if not changed:
            continue
        differ.append(target)
        if check:
            print(f"{target.name} differs from {path.relative_to(src_dir.parent)}")
            continue
        nbformat.write(nb, target)
        print(f"wrote {target}" + (f" ({len(unexecuted)} code cells without outputs)" if unexecuted else ""))
    return differ


# ==============================================================================================================
# Executing, normalising
# ==============================================================================================================


def merge_streams(outputs: list) -> list:
    """Consecutive stream outputs of the same name as one (what JupyterLab shows, and what nbval compares)."""
    merged: list = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if out.get("output_type") == "stream" and prev is not None and prev.get("output_type") == "stream":
            if prev.get("name") == out.get("name"):
                prev["text"] = prev["text"] + out["text"]
                continue
        merged.append(out)
    return merged


#: Machine details a committed output must not carry (checked in every cell nbval compares).
STALE = {
    "the throw-away runs folder": re.compile(r"/tmp/raytrain-refresh-\S+"),
    "an IP address": re.compile(r"\b(?!127\.0\.0\.1\b)\d{1,3}(\.\d{1,3}){3}\b"),
    "a dashboard link": re.compile(r"View the dashboard at"),
}


#: Lines of Ray's own logging (``2026-12-01 02:47:14,780\tINFO worker.py:...``) and its dashboard link: noise a
#: learner cannot act on, and machine details in a committed output.
RAY_LOG_LINE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d+\s+INFO |View the dashboard at")


def scrub(text: str, runs_root: str) -> str:
    """An ignored output as committed: the throw-away runs folder shown as ``runs``, this checkout's path
    dropped, Ray's INFO lines and dashboard link removed, node addresses masked."""
    text = text.replace(runs_root, "runs").replace(str(REPO) + "/", "")
    lines = [line for line in text.split("\n") if not RAY_LOG_LINE.search(line)]
    return STALE["an IP address"].sub("<node ip>", "\n".join(lines))


def normalise(nb: nbformat.NotebookNode, runs_root: str) -> list[str]:
    """Make an executed notebook open unmodified in JupyterLab and diff cleanly; returns warnings about machine
    details left in outputs that nbval compares (those must be fixed where they are printed)."""
    nb.metadata.pop("papermill", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata.pop("widgets", None)
    warnings = []
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        cell.outputs = merge_streams(cell.outputs)
        ignored = IGNORE_TAG in tags(cell)
        for out in cell.outputs:
            if ignored and "text" in out:  # compared outputs stay as printed: nbval's sanitizers handle paths
                out["text"] = scrub(out["text"], runs_root)
            text = out.get("text") or (out.get("data") or {}).get("text/plain", "")
            for what, pattern in STALE.items():
                if not ignored and pattern.search(str(text)):
                    warnings.append(f"cell {cell.get('id')}: {what} in a compared output")
    return warnings


def refresh(paths: list[Path]) -> None:
    """Execute the notebooks in order, in place, exactly as nbval will (no injected parameters), with a
    throw-away runs/ directory, then normalise them (:func:`normalise`)."""
    import os

    import papermill as pm

    with tempfile.TemporaryDirectory(prefix="raytrain-refresh-") as tmp:
        runs_root = str(Path(tmp) / "runs")
        os.environ["RAYTRAIN_RUNS_DIR"] = runs_root
        for path in paths:
            print(f"executing {path.name}", flush=True)
            pm.execute_notebook(str(path), str(path), cwd=str(HERE), kernel_name="python3", progress_bar=False)
            nb = nbformat.read(path, as_version=4)
            for warning in normalise(nb, runs_root):
                print(f"  {path.name}: {warning}")
            nbformat.validate(nb)
            nbformat.write(nb, path)


def main(argv: list[str]) -> int:
    out_dir = Path(argv[argv.index("--out") + 1]).resolve() if "--out" in argv else HERE
    if "--refresh" in argv and out_dir != HERE:
        print("--refresh executes the notebooks in notebooks/ only; leave out --out")
        return 2
    if "--check" in argv:
        differ = build(out_dir, check=True)
        if differ:
            print("run `python notebooks/build.py` (and --refresh where cells changed)")
        return 1 if differ else 0
    build(out_dir)
    if "--refresh" in argv:
        refresh([out_dir / f"{p.stem}.ipynb" for p in source_paths()])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
