"""A normal install: the wheel carries env.yaml, manifests/ and notebooks/; installed into a fresh virtual
environment (no repository in sight), ``raytrain-tutorial init`` writes a working folder and ``render`` and
``config`` work from it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile

import pytest

pytestmark = pytest.mark.slow

SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "env.yaml", "constraints.txt")


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, **kw)
    assert r.returncode == 0, f"{cmd} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def wheel(tmp_path_factory, repo_root):
    """The wheel, built from a copy of the sources (the shared checkout's build/ stays untouched)."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        shutil.copy2(repo_root / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "_data")
    for name in ("raytrain_helpers", "manifests", "notebooks", "profiles"):
        shutil.copytree(repo_root / name, src / name, ignore=ignore)
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), "."]
    _run(pip, cwd=src)
    (whl,) = out.glob("raytrain_tutorial-*.whl")
    return whl


def test_the_wheel_ships_the_data(wheel, repo_root):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {"raytrain_helpers/_data/env.yaml"}
    expected |= {f"raytrain_helpers/_data/manifests/{p.name}" for p in (repo_root / "manifests").glob("*.j2")}
    expected |= {f"raytrain_helpers/_data/notebooks/{p.name}" for p in (repo_root / "notebooks").glob("*.ipynb")}
    expected |= {f"raytrain_helpers/_data/profiles/{p.name}" for p in (repo_root / "profiles").glob("*.yaml")}
    assert any(n.startswith("raytrain_helpers/_data/profiles/") for n in expected)
    captured = repo_root / "raytrain_helpers" / "nccl" / "captured"
    expected |= {f"raytrain_helpers/nccl/captured/{p.name}" for p in captured.iterdir()}
    assert {"captured.json", "h200x2-fsdp2-p2p-nvlink.log"} <= {p.name for p in captured.iterdir()}
    assert expected - names == set()
    shipped = [n for n in names if n.startswith("raytrain_helpers/_data/notebooks/")]
    assert all(n.endswith(".ipynb") and n.count("/") == 3 for n in shipped), shipped  # not their sources or build


def test_init_render_and_config_from_a_fresh_venv(wheel, tmp_path, repo_root):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(wheel)])
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAYTRAIN_") and k != "PYTHONPATH"}
    where = _run([str(py), "-c", "import raytrain_helpers as rt; print(rt.__file__)"], cwd=outside, env=env)
    assert where.stdout.startswith(str(env_dir)), where.stdout  # the installed copy, not the checkout
    cli = str(env_dir / "bin" / "raytrain-tutorial")

    _run([cli, "init", "work"], cwd=outside, env=env)
    work = outside / "work"
    assert (work / "env.yaml").read_bytes() == (repo_root / "env.yaml").read_bytes()
    assert sorted(p.name for p in (work / "notebooks").iterdir()) == sorted(
        p.name for p in (repo_root / "notebooks").glob("*.ipynb")
    )
    env_yaml = (work / "env.yaml").read_text()
    # the local target's steps (target_defaults.local.train, the first steps line)
    (work / "env.yaml").write_text(re.sub(r"(?m)^(\s+)steps: \d+ ", r"\1steps: 5 ", env_yaml, count=1))
    config = _run([cli, "config"], cwd=work, env=env)
    assert "steps: 5" in config.stdout  # the working folder's env.yaml
    _run([cli, "render", "--target", "aws", "--out", "manifests-out"], cwd=work, env=env)
    rendered = sorted(p.name for p in (work / "manifests-out").rglob("*.yaml"))
    assert any("raycluster" in n for n in rendered), rendered
    # the shipped profile, found in the installed package from a folder that has no profiles/
    article = ["-f", "profiles/aws-article.yaml", "-p", "storage_path", "s3://my-checkpoints/raytrain"]
    profile = _run([cli, "config", *article], cwd=work, env=env)
    assert "model_id: Qwen/Qwen2.5-1.5B" in profile.stdout
    # priced offline (this venv has no dependencies: the defaults' preset shape, no hub id to look up)
    assert "minutes of cluster" in _run([cli, "cost", "--target", "aws"], cwd=work, env=env).stdout
