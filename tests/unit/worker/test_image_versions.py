"""The job's code against the Ray Train image's package versions, not only this environment's.

The job runs inside the DLC, whose transformers, tokenizers, huggingface-hub, pyarrow and pydantic differ from the
versions the rest of the suite runs (constraints.txt); torch and Ray are the image's in both. The pinned set,
with the source of each version, is ``constraints-image.txt``; ``image_site.py`` installs it into a folder of its
own, and the job's tests run in a Python process with that folder first on the path: model build and FSDP2 set-up,
the data and tokenizers, the hub, the job's config, the kernels' fallback, and a short Ray Train run that
checkpoints, resumes from its checkpoint and exports (``image_run.py``). The process reports what it imported
(and the Ray Train worker what it imported): every pinned version, from that folder.
"""

from __future__ import annotations

import ast
import json
import os
import secrets
import subprocess
import sys

import pytest

from raytrain_helpers.core.config import VersionSettings
from tests.unit.worker import image_site

REPO = image_site.REPO
#: The job's tests that depend on the versions of what it imports (the others test the notebook side or pure
#: arithmetic). test_model.py's two-rank FSDP2 run is left out: torch is the same in both, and the short run
#: below builds, shards, loads pretrained weights and exports through the same functions.
SELECTED = [
    "tests/unit/worker/test_data.py",
    "tests/unit/worker/test_hub.py",
    "tests/unit/worker/test_driver_no_weights.py",
    "tests/unit/worker/test_job_config.py",
    "tests/unit/worker/test_kernels.py",
    "tests/unit/worker/test_train_setup.py",
    "tests/unit/worker/image_run.py",
]
#: The distribution of each import name the job uses (besides torch, ray and the optional liger_kernel).
DISTRIBUTION = {
    "transformers": "transformers",
    "tokenizers": "tokenizers",
    "huggingface_hub": "huggingface-hub",
    "safetensors": "safetensors",
    "pyarrow": "pyarrow",
    "pydantic": "pydantic",
    "numpy": "numpy",
}


def _third_party_imports() -> set[str]:
    """The top-level names the job's modules import that are neither the standard library nor the package."""
    names = set()
    for path in (REPO / "raytrain_helpers" / "worker").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names.add((node.module or "").split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("raytrain_helpers", "__future__")}


def _pin(path, name: str) -> str:
    return next(line.split("==")[1].strip() for line in path.read_text().splitlines() if line.startswith(f"{name}=="))


def test_the_image_pins_cover_every_package_the_job_imports():
    """A new import in the job (say ``datasets``) fails here until its image version is pinned, with its source."""
    pinned = image_site.pins()
    assert _third_party_imports() - {"torch", "ray", "liger_kernel"} == set(DISTRIBUTION)
    assert {DISTRIBUTION[m] for m in image_site.JOB_IMPORTS} == set(DISTRIBUTION.values()) <= set(pinned)
    assert pinned["transformers"] == "5.13.0"  # the image's changelog (Ray Train v1.1)
    # torch and ray come from the test environment: they must be the image's already
    assert _pin(REPO / "constraints.txt", "ray") == VersionSettings().ray_version == "2.58.0"
    assert _pin(REPO / "constraints.txt", "torch") == "2.13.0"
    text = image_site.PINS_FILE.read_text()
    assert "docker/ray-train/uv.lock" in text and "Ray Train v1.1" in text  # where the versions come from


@pytest.mark.slow
def test_the_jobs_tests_pass_with_the_images_package_versions(tmp_path):
    site = image_site.ensure_site()
    report = tmp_path / "imported.json"
    # a Ray of its own (never the session's cluster), and none of this pytest's own settings
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "PYTEST_", "RAYTRAIN_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(site), str(REPO)]), RAYTRAIN_IMAGE_REPORT=str(report))
    # Ray's token authentication, as on every cluster the tutorial starts: a fresh token, its file 0600
    token = tmp_path / "ray-token"
    with os.fdopen(os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(secrets.token_hex(32))
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-n", "0", "-p", "no:cacheprovider"]
    cmd += ["-p", "tests.unit.worker.image_site", *SELECTED]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert " passed" in out and "skipped" not in out, out[-3000:]
    found = json.loads(report.read_text())
    for name, version in image_site.pins().items():
        assert found["dists"][name] == [version, str(site.resolve())], name
    assert set(found["modules"]) == set(image_site.JOB_IMPORTS)
    assert all(f.startswith(str(site)) for f in found["modules"].values()), found["modules"]
    worker = json.loads((tmp_path / "imported.json.worker").read_text())  # inside the Ray Train worker
    assert worker["transformers"][0] == image_site.pins()["transformers"]
    assert worker["transformers"][1].startswith(str(site)) and worker["pydantic"] == image_site.pins()["pydantic"]
