"""The notebooks teach: enough prose, the same opening and a troubleshooting section in every chapter, and every
`rt.` name a code cell uses exists in the package, every artifact shown is read to the learner in its own words.
Pure: nothing is executed (the committed outputs are read)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

import raytrain_helpers as rt
from raytrain_helpers.steps import display

REPO = Path(__file__).resolve().parents[2]
MIN_WORDS = 3500
OPENING = ("**What you will learn**", "**Time**", "**Cost on aws**", "**Prerequisites**")


@pytest.fixture(scope="module")
def notebooks(build):
    """Every notebook as its text source says (``notebooks/src``; test_sources checks the committed ones match)."""
    return {p.stem: build.read_source(p) for p in build.source_paths()}


def markdown_words(nb) -> int:
    return sum(len(re.findall(r"[A-Za-z0-9][\w'.-]*", c.source)) for c in nb.cells if c.cell_type == "markdown")


def test_the_chapters_carry_enough_prose(notebooks):
    assert list(notebooks) == ["01_capacity", "02_cluster", "03_plugins", "04_kuberay", "05_train", "06_verify",
                               "07_benchmark", "08_teardown"]  # fmt: skip
    total = sum(markdown_words(nb) for nb in notebooks.values())
    assert total >= MIN_WORDS, f"{total} words of prose across the notebooks"
    for name, nb in notebooks.items():
        assert markdown_words(nb) >= 250, name


def test_every_chapter_opens_the_same_way_and_ends_with_troubleshooting(notebooks):
    for name, nb in notebooks.items():
        first = nb.cells[0]
        assert first.cell_type == "markdown" and first.source.startswith("# 0"), name
        for heading in OPENING:
            assert heading in first.source, (name, heading)
        assert "parameters" in nb.cells[1].metadata.get("tags", []), name
        if name == "01_capacity":  # the full summary and the price table once; a one-line reminder after
            assert "cost_note(cfg" in nb.cells[3].source, name
        else:
            assert f'describe(cfg, brief=True, notebook="{name[:2]}")' in nb.cells[2].source, name
            assert not any("cost_note(" in c.source for c in nb.cells), name
        sections = [c.source for c in nb.cells if c.cell_type == "markdown" and re.match(r"## \d+\. ", c.source)]
        assert len(sections) >= 2, name
        numbers = [int(re.match(r"## (\d+)\.", s).group(1)) for s in sections]
        assert numbers == list(range(1, len(numbers) + 1)), (name, numbers)
        last = nb.cells[-1]
        assert last.cell_type == "markdown" and last.source.startswith("## Troubleshooting"), name
        anchor = f"notebook-{name[:2]}-{name[3:]}"
        assert f"](../docs/troubleshooting.md#{anchor})" in last.source, (name, "one link to its troubleshooting")
        section = troubleshooting_sections()[anchor]
        assert section.count("You see:") >= 3 and section.count("Fix:") >= 3, name


def slug(heading: str) -> str:
    """The anchor the site gives a heading (``myst_heading_anchors`` in docs/conf.py): MyST's own GitHub-style
    slug."""
    from myst_parser.slugs import github_slugify

    return github_slugify(heading.strip())


def doc_anchors(path: Path) -> dict[str, str]:
    """Each heading's anchor in a docs page, with the text up to the next heading of the same level or above."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    heads = list(re.finditer(r"^(#{1,6}) (.+)$", text, re.M))
    out = {}
    for i, m in enumerate(heads):
        end = next((h.start() for h in heads[i + 1 :] if len(h.group(1)) <= len(m.group(1))), len(text))
        out[slug(m.group(2))] = text[m.end() : end]
    return out


def troubleshooting_sections() -> dict[str, str]:
    return doc_anchors(REPO / "docs" / "troubleshooting.md")


def test_every_link_from_a_notebook_to_the_docs_leads_to_a_page_and_heading_that_exist(notebooks):
    links = 0
    for name, nb in notebooks.items():
        for cell in nb.cells:
            if cell.cell_type != "markdown":
                continue
            for target in re.findall(r"\]\((\.\./docs/[^)\s]+)\)", cell.source):
                links += 1
                page, _, anchor = target.partition("#")
                path = (REPO / "notebooks" / page).resolve()
                assert path.is_file(), (name, target)
                assert not anchor or anchor in doc_anchors(path), (name, target, sorted(doc_anchors(path)))
    assert links >= 16, links


def test_the_slug_is_mysts():
    assert slug("Notebook 01: capacity") == "notebook-01-capacity"
    assert slug("4. Cost") == "4-cost"
    assert slug("No GPU hour before the storage is proven") == "no-gpu-hour-before-the-storage-is-proven"


#: A code cell that shows the learner an artifact: a step's result table, a manifest, the criteria, a source listing.
SHOWS = re.compile(r"\.show\(\)|show_manifest|criteria_view|show_source")


def _output_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        data = out.get("data") or {}
        parts.append(out.get("text") or data.get("text/plain") or data.get("text/html") or "")
    return "\n".join("".join(p) if isinstance(p, list) else p for p in parts)


def shown_and_read(nb) -> list[tuple[list, list[str]]]:
    """Each group of consecutive code cells that shows an artifact, with the prose that follows it up to the next
    code cell (what the learner reads about what they just saw)."""
    groups, i = [], 0
    while i < len(nb.cells):
        if nb.cells[i].cell_type != "code" or not SHOWS.search(nb.cells[i].source):
            i += 1
            continue
        j = i
        while j < len(nb.cells) and nb.cells[j].cell_type == "code":
            j += 1
        k = j
        while k < len(nb.cells) and nb.cells[k].cell_type == "markdown":
            k += 1
        groups.append((nb.cells[i:j], [c.source for c in nb.cells[j:k]]))
        i = k
    return groups


def unexplained(nb) -> list[str]:
    """The artifacts shown with no prose after them, or whose prose quotes (in `code`) nothing of what they print:
    an explanation reads the output in its own words (a column, a status, a field of the manifest)."""
    missing = []
    for cells, prose in shown_and_read(nb):
        quoted = set(re.findall(r"`([^`\n]+)`", "\n".join(prose)))
        printed = "\n".join(_output_text(c) for c in cells)
        if not prose:
            missing.append(f"{cells[0].id}: no prose after it")
        elif not printed:
            missing.append(f"{cells[0].id}: no committed output (run notebooks/build.py --refresh)")
        elif not any(q in printed for q in quoted):
            missing.append(f"{cells[0].id}: the prose after it quotes none of its output ({sorted(quoted)})")
    return missing


def test_important_outputs_are_explained():
    """Every artifact a committed notebook shows is followed by prose, before the next code cell, that reads it: it
    quotes in `code` at least one thing the output prints."""
    shown = 0
    for path in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        shown += len(shown_and_read(nb))
        assert not unexplained(nb), (path.name, unexplained(nb))
    assert shown >= 12


def _rt_chains(source: str) -> list[str]:
    """Dotted names rooted at ``rt`` in a cell (``rt.steps.train.submit``), outermost only."""
    chains = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            parts, inner = [], node
            while isinstance(inner, ast.Attribute):
                parts.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id == "rt":
                chains.append(".".join(["rt", *reversed(parts)]))
    return [c for c in chains if not any(o != c and o.startswith(c + ".") for o in chains)]


def _string_args(source: str, func: str) -> list[str]:
    """The literal first arguments of calls to ``...func(...)`` in a cell."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == func:
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                out.append(node.args[0].value)
    return out


def test_every_rt_name_in_a_code_cell_exists(notebooks):
    checked = 0
    for name, nb in notebooks.items():
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            source = "\n".join(line for line in cell.source.splitlines() if not line.startswith("%"))
            for chain in _rt_chains(source):
                obj = rt
                for part in chain.split(".")[1:]:
                    assert hasattr(obj, part), f"{name}: {chain} ({part!r} does not exist)"
                    obj = getattr(obj, part)
                checked += 1
            for target in _string_args(source, "show_source"):
                assert display.resolve(target) is not None, (name, target)
            for step in _string_args(source, "equivalent_commands"):
                assert step in display.STEP_COMMANDS, (name, step)
            for manifest in _string_args(source, "show_manifest"):
                assert manifest in display.MANIFEST_NAMES, (name, manifest)
    assert checked > 40


def test_no_table_in_a_committed_output_is_wider_than_a_1280_px_page():
    """JupyterLab wraps a plain-text line longer than about 115 characters at 1,280 px, which breaks a table's rows
    in two: every table line of the committed outputs stays within :data:`display.MAX_WIDTH`."""
    wide = []
    for path in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            for out in cell.get("outputs", []):
                text = out.get("text") or out.get("data", {}).get("text/plain") or ""
                text = "".join(text) if isinstance(text, list) else text
                wide += [
                    f"{path.name}: {len(line)} chars: {line[:60]}"
                    for line in text.splitlines()
                    if line.startswith(("|", "+-")) and len(line) > display.MAX_WIDTH
                ]
    assert not wide, "\n".join(wide)
