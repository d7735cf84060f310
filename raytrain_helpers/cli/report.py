"""``raytrain-tutorial report RUN``: one self-contained HTML file of an executed run, to keep or to mail.

It joins the run's executed notebooks (``runs/<run>/notebooks/*.ipynb``, as ``raytrain-tutorial run`` writes them,
or any folder of executed notebooks) into one page, with the job's record on top. Plots are embedded as images;
no script or style is fetched from the network, so the file opens the same way offline in a year.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from ..core.paths import runs_dir
from ..core.validation import ConfigError
from .args import add_settings_args, settings_from_args

#: ``<script src="https://...">`` tags the HTML template adds for interactive widgets and maths.
REMOTE_SCRIPT = re.compile(r'<script[^>]*\ssrc="https?://[^"]*"[^>]*>\s*</script>', re.IGNORECASE)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``report``."""
    p = sub.add_parser("report", help="write one self-contained HTML file of an executed run")
    p.add_argument("run", help="a run name (runs/<run>/) or the path of a run folder")
    p.add_argument("--out", default=None, help="the HTML file (default: runs/<run>/report.html)")
    add_settings_args(p)
    p.set_defaults(func=_cli_report)


def _cli_report(args: argparse.Namespace) -> int:
    folder = Path(args.run)
    if not folder.is_dir():
        folder = runs_dir(settings_from_args(args)) / args.run
    out = Path(args.out) if args.out else folder / "report.html"
    path = write_report(folder, out)
    print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
    return 0


def run_notebooks(folder: Path) -> list[Path]:
    """The executed notebooks of a run folder, in order."""
    nb_dir = folder / "notebooks" if (folder / "notebooks").is_dir() else folder
    found = sorted(nb_dir.glob("[0-9]*.ipynb"))
    if not found:
        raise ConfigError(
            f"no executed notebooks in {nb_dir}. Fix: run the tutorial first (raytrain-tutorial run), "
            "or name the run folder that holds them"
        )
    return found


def combined_notebook(folder: Path):
    """One notebook: a title, the job record, then every notebook's cells under its own heading."""
    import nbformat

    notebooks = run_notebooks(folder)
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(f"# Run `{folder.name}`\n\n" + _job_summary(folder)))
    for path in notebooks:
        part = nbformat.read(str(path), as_version=4)
        nb.cells.append(nbformat.v4.new_markdown_cell(f"---\n\n*From `{path.name}`*"))
        nb.cells.extend(part.cells)
    nb.metadata = nbformat.read(str(notebooks[0]), as_version=4).metadata
    return nb


def _job_summary(folder: Path) -> str:
    try:
        job = json.loads((folder / "job.json").read_text())
    except (OSError, ValueError):
        return "No job record in this run folder."
    keys = ("status", "submission_id", "run_name", "wall_s")
    lines = [f"| {k} | {job.get(k, '-')} |" for k in keys if k in job]
    return "| job | |\n|---|---|\n" + "\n".join(lines) if lines else "Job record present."


def write_report(folder: Path, out: Path) -> Path:
    """Render the run's notebooks into one HTML file with no network references."""
    return export_html(combined_notebook(folder), out)


def export_html(nb, out: Path) -> Path:
    """One notebook node as a self-contained HTML file (images embedded, no remote scripts)."""
    from nbconvert import HTMLExporter

    # a virtual environment made with --system-site-packages finds nbconvert there but not its templates,
    # which live under the base installation's share/jupyter: add that to Jupyter's search path for this call
    base = Path(sys.base_prefix) / "share" / "jupyter"
    saved = os.environ.get("JUPYTER_PATH")
    if base.is_dir():
        os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (saved, str(base)) if p)
    try:
        exporter = HTMLExporter(template_name="lab", embed_images=True)
        html, _ = exporter.from_notebook_node(nb)
    finally:
        if saved is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = saved
    html = REMOTE_SCRIPT.sub("", html)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out
