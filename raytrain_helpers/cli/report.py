"""``raytrain-tutorial report RUN``: one self-contained HTML file of an executed run, to keep or to mail.

It joins the run's executed notebooks (``runs/<run>/notebooks/*.ipynb``, as ``raytrain-tutorial run`` writes them,
or any folder of executed notebooks) into one page, with the job's record on top. Plots are embedded as images;
no script or style is fetched from the network, so the file opens the same way offline in a year.

The page is inert, because a notebook is whatever its author wrote (a workshop's facilitator opens every attendee's):
:func:`export_html` shows outputs without running them and reads no file but the notebooks.

* No image embedding of paths: nbconvert 7.17's ``embed_images`` inlines any Markdown ``![](path)`` under the
  working folder, checked with ``os.path.abspath``, so a link inside it is followed
  (``nbconvert/filters/markdown_mistune.py``, ``_src_to_base64``). Images come only from outputs' own data.
* ``sanitize_html=True`` (the exporter's default is False): the lab template then passes Markdown and ``text/html``
  through ``clean_html`` (bleach, with this module's allowlist: :func:`clean_html`) and leaves
  ``application/javascript`` outputs out (``share/jupyter/nbconvert/templates/lab/base.html.j2``).
* Then the page itself: every ``<script>``, frame, object, form, ``<base>``, ``<link>`` and ``<meta>`` removed,
  every ``on*`` attribute, every URL attribute but ``data:image/`` images and plain links, and a
  Content-Security-Policy ``<meta>`` first in ``<head>`` that allows no script, no fetch and no frame
  (:data:`CSP`), so a template or sanitizer gap still runs nothing.
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

#: The page's Content-Security-Policy: inline styles and ``data:`` images and fonts, nothing else (no script of
#: any origin, no fetch, no frame, no form, no ``<base>``).
CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
#: Elements an inert page never carries (whoever wrote them: the template, a notebook, an output).
DROPPED_TAGS = ("script", "iframe", "frame", "frameset", "object", "embed", "applet", "form", "base", "link", "meta",
                "noscript", "template", "portal")  # fmt: skip
#: Attributes holding a URL: only ``data:image/`` (for ``src``) and http(s)/mailto/``#`` (for ``href``) stay.
URL_ATTRS = ("src", "href", "srcset", "action", "formaction", "xlink:href", "data", "poster", "background", "ping",
             "lowsrc", "dynsrc", "codebase", "cite", "longdesc", "usemap", "manifest")  # fmt: skip
_SAFE_HREF = re.compile(r"^(https?:|mailto:|#)", re.IGNORECASE)
_SAFE_IMG = re.compile(r"^data:image/(png|jpeg|gif|webp|svg\+xml);base64,", re.IGNORECASE)


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
    """One notebook node as a self-contained, inert HTML file (see the module's docstring)."""
    from nbconvert import HTMLExporter

    nb.metadata.pop("widgets", None)  # the template writes widget state into a <script>

    # a virtual environment made with --system-site-packages finds nbconvert there but not its templates,
    # which live under the base installation's share/jupyter: add that to Jupyter's search path for this call
    base = Path(sys.base_prefix) / "share" / "jupyter"
    saved = os.environ.get("JUPYTER_PATH")
    if base.is_dir():
        os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (saved, str(base)) if p)
    try:
        exporter = HTMLExporter(
            template_name="lab", embed_images=False, sanitize_html=True, filters={"clean_html": clean_html}
        )
        html, _ = exporter.from_notebook_node(nb)
    finally:
        if saved is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = saved
    html = inert_html(html)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out


#: What :func:`clean_html` keeps of Markdown and ``text/html``: text structure, tables, images, links, no more.
ALLOWED_TAGS = ("a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em", "h1",
                "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "samp", "small",
                "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u",
                "ul")  # fmt: skip
ALLOWED_ATTRIBUTES = {"*": ["class", "id", "title"], "a": ["href"], "img": ["src", "alt", "width", "height"],
                      "td": ["align", "colspan", "rowspan"], "th": ["align", "colspan", "rowspan"]}  # fmt: skip


def clean_html(element) -> str:  # noqa: ANN001 - what nbconvert's template passes (str or bytes)
    """The lab template's ``clean_html`` filter, replaced: nbconvert 7.17's (``filters/strings.py``) keeps bleach's
    inline tags plus div/pre/code/span/table/tr/td only and escapes the rest, so every heading, paragraph and table
    header of a notebook would show as literal tags. This one keeps :data:`ALLOWED_TAGS` and
    :data:`ALLOWED_ATTRIBUTES` (bleach: anything else escaped, URLs only http(s), mailto and data, which
    :func:`inert_html` narrows again)."""
    import bleach

    text = element.decode() if isinstance(element, bytes) else str(element)
    return bleach.clean(text, tags=set(ALLOWED_TAGS), attributes=ALLOWED_ATTRIBUTES,
                        protocols={"http", "https", "mailto", "data"}, strip=True)  # fmt: skip


def inert_html(html: str) -> str:
    """``html`` with nothing that runs or fetches: :data:`DROPPED_TAGS` removed, ``on*`` attributes and unsafe URLs
    dropped, and :data:`CSP` as the first element of ``<head>``."""
    import bs4

    soup = bs4.BeautifulSoup(html, features="html.parser")
    for tag in soup.find_all(DROPPED_TAGS):
        tag.decompose()
    for tag in soup.find_all(True):
        for attr in list(tag.attrs):
            name = attr.lower()
            value = " ".join(tag[attr]) if isinstance(tag[attr], list) else str(tag[attr])
            if name.startswith("on") or name == "style" and re.search(r"url\s*\(|expression", value, re.I):
                del tag[attr]
            elif name in URL_ATTRS or name.endswith(":href"):
                keep = (name == "src" and tag.name == "img" and _SAFE_IMG.match(value.strip())) or (
                    name == "href" and tag.name == "a" and _SAFE_HREF.match(value.strip())
                )
                if not keep:
                    del tag[attr]
    if soup.html is None:
        soup = bs4.BeautifulSoup(f"<html><head></head><body>{soup}</body></html>", features="html.parser")
    if soup.head is None:
        soup.html.insert(0, soup.new_tag("head"))
    head = soup.head
    head.insert(0, soup.new_tag("meta", attrs={"http-equiv": "Content-Security-Policy", "content": CSP}))
    head.insert(0, soup.new_tag("meta", attrs={"charset": "utf-8"}))
    return str(soup)
