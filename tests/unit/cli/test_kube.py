"""``raytrain-tutorial render|kuberay|plugins``: the commands of cli.kube, in a subprocess and in-process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from raytrain_helpers import cli
from raytrain_helpers.core import config
from raytrain_helpers.plan import manifests
from tests.helpers import fake_local_status, ray_node

REPO = Path(__file__).resolve().parents[3]


def settings(**params):
    base = dict(target="aws")
    base.update(params)
    return config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, **base)


def _cli(*args, cwd=REPO):
    return subprocess.run(
        [sys.executable, "-m", "raytrain_helpers.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def test_render_cli_writes_one_object_per_file(tmp_path):
    out = tmp_path / "manifests"
    r = _cli("render", "--target", "aws", "-p", "gpu_node_count", "3", "--out", str(out))
    assert r.returncode == 0, r.stderr
    files = sorted(p for p in out.rglob("*.yaml"))
    assert len(files) == len(manifests.render_all(settings()))
    for f in files:
        docs = [d for d in yaml.safe_load_all(f.read_text()) if d]
        assert len(docs) == 1, f
    rc = yaml.safe_load((next(out.glob("*-raycluster-raytrain.yaml"))).read_text())
    assert rc["spec"]["workerGroupSpecs"][0]["replicas"] == 3
    assert (out / "alternatives").is_dir()


def test_render_cli_stdout(monkeypatch, capsys):
    monkeypatch.setattr(config, "_check_ray_version", lambda *a, **k: None)  # importing ray is slow
    monkeypatch.chdir(REPO)
    assert cli.main(["render", "--target", "aws", "-p", "gpu_node_count", "3"]) == 0
    out = capsys.readouterr().out
    rendered = manifests.render_all(settings(gpu_node_count=3))
    assert out.count("# file: ") == len(rendered)
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert docs == [o for _, o in rendered]
    assert cli.main(["render", "--target", "aws", "--no-alternatives"]) == 0
    assert "RayJob" not in capsys.readouterr().out


def test_render_cli_rejects_bad_settings(monkeypatch, capsys):
    monkeypatch.setattr(config, "_check_ray_version", lambda *a, **k: None)
    monkeypatch.chdir(REPO)
    assert cli.main(["render", "--target", "aws", "-p", "gpus_per_node", "3"]) == 2
    assert "gpus_per_node" in capsys.readouterr().err


def test_kuberay_and_plugins_commands_on_local(monkeypatch, capsys):
    monkeypatch.setattr(config, "_check_ray_version", lambda *a, **k: None)
    monkeypatch.chdir(REPO)
    fake_local_status(monkeypatch, True, [ray_node("head", "head", 0, 0, 0), ray_node("worker-0", "worker", 1, 0, 1)])
    assert cli.main(["kuberay", "status", "--target", "local"]) == 0
    assert "KubeRay (local, status): OK - local raylets" in capsys.readouterr().out
    assert cli.main(["plugins", "up", "--target", "local"]) == 0
    assert "device plugins (local, up): OK" in capsys.readouterr().out
    assert cli.main(["kuberay", "down", "--target", "local"]) == 0
    fake_local_status(monkeypatch, False)
    assert cli.main(["plugins", "status", "--target", "local"]) == 1
    assert "device plugins (local, status): NOT OK" in capsys.readouterr().out
