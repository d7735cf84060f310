"""The notebooks teach: enough prose, the same opening and a troubleshooting section in every chapter, and every
`rt.` name a code cell uses exists in the package. Pure: the notebooks are read from their sources, not executed."""

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
        assert "cost_note(cfg" in nb.cells[3].source, name
        sections = [c.source for c in nb.cells if c.cell_type == "markdown" and re.match(r"## \d+\. ", c.source)]
        assert len(sections) >= 2, name
        numbers = [int(re.match(r"## (\d+)\.", s).group(1)) for s in sections]
        assert numbers == list(range(1, len(numbers) + 1)), (name, numbers)
        last = nb.cells[-1]
        assert last.cell_type == "markdown" and last.source.startswith("## Troubleshooting"), name
        assert last.source.count("You see:") >= 3 and last.source.count("Fix:") >= 3, name


def test_important_outputs_are_explained(notebooks):
    """Every step call and every artifact shown is followed by prose before the next code cell (or the check)."""
    for name, nb in notebooks.items():
        explained = 0
        for cell, after in zip(nb.cells, nb.cells[1:], strict=False):
            if cell.cell_type == "code" and re.search(
                r"\.show\(\)|show_manifest|criteria_view|show_source", cell.source
            ):
                explained += after.cell_type == "markdown"
        assert explained >= 1, name


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
