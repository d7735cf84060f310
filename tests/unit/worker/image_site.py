"""The job's packages at the Ray Train image's versions (``constraints-image.txt``), in a folder of their own.

:func:`ensure_site` installs exactly the pinned set with ``uv pip install --target`` into
``.venv/image-site/<hash of the file>/`` (once: a folder that is complete is reused, so a second run costs
nothing; a changed file gets a new folder). A Python process with that folder first on ``PYTHONPATH`` imports
transformers, tokenizers, huggingface-hub, safetensors, pyarrow and pydantic from it, and torch and Ray from the
virtual environment (already the image's versions).

Also a pytest plugin (``-p tests.unit.worker.image_site``): at the end of a session it writes, to the file named
by ``RAYTRAIN_IMAGE_REPORT``, the version and folder of every pinned distribution as that process found them, and
the file of each module the job imports, so the caller can check what the tests really ran with.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PINS_FILE = REPO / "constraints-image.txt"
#: What the job imports besides torch and ray (the import names of pinned distributions), and the optional
#: liger-kernel, which the image does not carry (the job's runtime_env installs it on aws).
JOB_IMPORTS = ("transformers", "tokenizers", "huggingface_hub", "safetensors", "pyarrow", "pydantic", "numpy")
#: Where the installed folders live, beside the test command's virtual environment.
CACHE = Path(os.environ.get("RAYTRAIN_IMAGE_SITE_CACHE", REPO / ".venv" / "image-site"))


def pins(path: Path = PINS_FILE) -> dict[str, str]:
    """``{distribution: version}`` of the file's ``name==version`` lines (names normalised as PyPI does)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            out[normalise(name)] = version.strip()
    return out


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def site_dir(path: Path = PINS_FILE) -> Path:
    return CACHE / hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def ensure_site(path: Path = PINS_FILE) -> Path:
    """The folder holding the pinned set, installed now if no complete one exists (``.complete`` marks one)."""
    final = site_dir(path)
    if (final / ".complete").exists():
        return final
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", sys.executable]
    subprocess.run([*cmd, "--target", str(tmp), "-r", str(path)], check=True)
    (tmp / ".complete").write_text(path.read_text())
    if not (final / ".complete").exists():  # another process may have finished first: keep its folder
        shutil.rmtree(final, ignore_errors=True)
        try:
            tmp.rename(final)
        except OSError:
            pass
    shutil.rmtree(tmp, ignore_errors=True)
    for old in CACHE.iterdir():  # folders of earlier versions of the file
        if old != final and not old.name.startswith(f"{final.name}.tmp-"):
            shutil.rmtree(old, ignore_errors=True)
    return final


def found() -> dict[str, object]:
    """What this process imports: each pinned distribution's version and folder, each job module's file."""
    dists = {}
    for name in pins():
        try:
            d = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        dists[name] = [d.version, str(Path(d.locate_file("")).resolve())]
    modules = {m: getattr(sys.modules[m], "__file__", None) for m in JOB_IMPORTS if m in sys.modules}
    return dict(dists=dists, modules=modules, python=sys.version.split()[0])


def pytest_sessionfinish(session, exitstatus):  # noqa: ARG001 - the pytest hook's signature
    report = os.environ.get("RAYTRAIN_IMAGE_REPORT")
    if report:
        Path(report).write_text(json.dumps(found()))
