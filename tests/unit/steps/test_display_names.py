"""The notebooks call the presentation kit as ``rt.steps.display.<name>``: every name they call is there, and is
the kit's own object (not a copy that could drift from it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from raytrain_helpers import present
from raytrain_helpers.steps import display

NOTEBOOKS = Path(__file__).resolve().parents[3] / "notebooks"
CALLED = re.compile(r"\brt\.steps\.display\.([A-Za-z_]\w*)")


def names_called() -> set[str]:
    """Every ``rt.steps.display.<name>`` in the notebooks and their sources."""
    names: set[str] = set()
    for path in sorted(NOTEBOOKS.rglob("*")):
        if path.is_file() and path.suffix in (".ipynb", ".py", ".md"):
            names |= set(CALLED.findall(path.read_text(errors="replace")))
    return names


def test_the_notebooks_call_the_display_module():
    assert {"cost_note", "equivalent_commands", "show_manifest", "efficiency"} <= names_called()


@pytest.mark.parametrize("name", sorted(names_called()))
def test_every_name_the_notebooks_call_is_there(name):
    assert hasattr(display, name), f"rt.steps.display.{name} is called by a notebook but not exported"
    if name != "efficiency":  # the one view that reads a step's logic lives in steps
        assert getattr(display, name) is getattr(present, name)


def test_every_exported_name_resolves():
    assert [name for name in display.__all__ if not hasattr(display, name)] == []
    assert [name for name in present.__all__ if not hasattr(present, name)] == []
