"""The notebooks' build script (``notebooks/build.py``: not a package module), loaded once for the tests here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def load_build():
    spec = importlib.util.spec_from_file_location("notebooks_build", REPO / "notebooks" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def build():
    return load_build()
