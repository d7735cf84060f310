"""``raytrain-tutorial render|kuberay|plugins``: the commands of cli.kube, in a subprocess and in-process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from raytrain_helpers import cli
from raytrain_helpers.core import loading
from raytrain_helpers.plan import manifests
from tests.helpers import aws_settings, fake_local_status, ray_node
from tests.schemas import eksctl_schema

REPO = Path(__file__).resolve().parents[3]


settings = aws_settings


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
    files = sorted(p for p in out.rglob("*.yaml") if p.parent.name not in ("eksctl", "helm"))
    assert len(files) == len(manifests.render_all(settings()))
    for f in files:
        docs = [d for d in yaml.safe_load_all(f.read_text()) if d]
        assert len(docs) == 1, f
    rc = yaml.safe_load((next(out.glob("*-raycluster-raytrain.yaml"))).read_text())
    assert rc["spec"]["workerGroupSpecs"][0]["replicas"] == 3
    assert (out / "alternatives").is_dir()


def test_render_writes_every_document_of_the_aws_path_and_each_parses(tmp_path):
    out = tmp_path / "rendered"
    r = _cli("render", "--target", "aws", "--out", str(out))
    assert r.returncode == 0, r.stderr
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    objects = [name for name, _ in manifests.render_all(settings())]
    assert written == sorted(
        [
            *objects,
            "helm/nvidia-device-plugin.values.yaml",
            "helm/raytrain-aws-efa-k8s-device-plugin.values.yaml",
            "helm/kuberay-operator.values.yaml",
            "eksctl/cluster.yaml",
            "eksctl/gpu-nodegroup.yaml",
            "iam/storage-role-trust-policy.json",
            "iam/storage-role-permission-policy.json",
            "iam/bucket-policy.json",
            "eks/pod-identity-association.json",
        ]
    )
    assert set(r.stdout.splitlines()) >= {str(out / name) for name in written}  # each file written is listed
    for name in written:
        text = (out / name).read_text()
        doc = json.loads(text) if name.endswith(".json") else yaml.safe_load(text)
        assert doc, name
    kinds = {yaml.safe_load((out / name).read_text())["kind"] for name in objects}
    # the rest are Helm releases' values
    assert {"Namespace", "NetworkPolicy", "ServiceAccount", "RayCluster", "RayJob"} == kinds
    assert yaml.safe_load((out / "helm/kuberay-operator.values.yaml").read_text()) == {
        "nodeSelector": {"role": "system"}
    }
    assert yaml.safe_load((out / "eksctl/gpu-nodegroup.yaml").read_text())["managedNodeGroups"][0]["efaEnabled"]
    trust = json.loads((out / "iam/storage-role-trust-policy.json").read_text())
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    policy = json.loads((out / "iam/storage-role-permission-policy.json").read_text())
    assert {
        a for st in policy["Statement"] for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
    } >= {
        "s3:ListBucket",
        "s3:GetObject",
        "s3:PutObject",
    }
    bucket = json.loads((out / "iam/bucket-policy.json").read_text())
    assert bucket["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    kinds_of = [yaml.safe_load((out / name).read_text())["kind"] for name in objects]
    assert kinds_of.count("NetworkPolicy") == 2
    assert "GPU_AZ" in r.stdout and "ACCOUNT" in r.stdout  # the placeholders are named
    import jsonschema  # the written eksctl configs against eksctl's own ClusterConfig schema (schemas/README.md)

    for name in ("eksctl/cluster.yaml", "eksctl/gpu-nodegroup.yaml"):
        jsonschema.Draft7Validator(eksctl_schema()).validate(yaml.safe_load((out / name).read_text()))


def test_render_cli_stdout(monkeypatch, capsys):
    monkeypatch.setattr(loading, "_check_ray_version", lambda *a, **k: None)  # importing ray is slow
    monkeypatch.chdir(REPO)
    assert cli.main(["render", "--target", "aws", "-p", "gpu_node_count", "3"]) == 0
    out = capsys.readouterr().out
    rendered = manifests.render_all(settings(gpu_node_count=3))
    documents = manifests.aws_documents(settings(gpu_node_count=3))
    assert out.count("# file: ") == len(rendered) + len(documents)
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert docs[: len(rendered)] == [o for _, o in rendered]
    assert docs[len(rendered) :] == [yaml.safe_load(text) for _, text in documents]
    assert cli.main(["render", "--target", "aws", "--no-alternatives"]) == 0
    assert "RayJob" not in capsys.readouterr().out


def test_render_cli_rejects_bad_settings(monkeypatch, capsys):
    monkeypatch.setattr(loading, "_check_ray_version", lambda *a, **k: None)
    monkeypatch.chdir(REPO)
    assert cli.main(["render", "--target", "aws", "-p", "gpus_per_node", "3"]) == 2
    assert "gpus_per_node" in capsys.readouterr().err


def test_kuberay_and_plugins_commands_on_local(monkeypatch, capsys):
    monkeypatch.setattr(loading, "_check_ray_version", lambda *a, **k: None)
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
