"""clients.helm: the arguments helm gets (pinned chart, values file, the client's context and kubeconfig), and
its failures as K8sError, with a fake ``helm`` that records what it was asked."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
import yaml

from raytrain_helpers.clients import helm
from raytrain_helpers.clients.kubernetes import K8sError


class FakeClient:
    """What helm reads of a Kubernetes client: the context and kubeconfig api_client recorded."""

    def __init__(self, context=None, kubeconfig=None):
        self.__dict__["_raytrain_context"] = context
        self.__dict__["_raytrain_kubeconfig"] = kubeconfig


@pytest.fixture
def fake_helm(tmp_path, monkeypatch):
    """A `helm` that records argv and the values file; it fails when its first argument is 'fail'."""
    log = tmp_path / "helm.log"
    exe = tmp_path / "bin" / "helm"
    exe.parent.mkdir()
    exe.write_text(f"""#!{sys.executable}
import json, sys
args = sys.argv[1:]
vals = [open(args[i + 1]).read() for i, a in enumerate(args) if a == "-f"]
open({str(log)!r}, "a").write(json.dumps({{"args": args, "values": vals}}) + "\\n")
if args[0] == "fail":
    sys.stderr.write("Error: chart not found\\n")
    sys.exit(1)
""")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{exe.parent}:/usr/bin:/bin")
    return log


def calls(log: Path) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines()]


def test_no_helm_on_path(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert helm.executable() is None
    with pytest.raises(K8sError, match="helm is not on PATH"):
        helm.run_helm(["version"])


def test_kube_args_follow_the_client():
    assert helm.kube_args(FakeClient("ctx", "/k/config")) == ["--kube-context", "ctx", "--kubeconfig", "/k/config"]
    assert helm.kube_args(FakeClient()) == []


def test_upgrade_install_pins_the_chart_and_passes_the_values(fake_helm):
    client = FakeClient("standin", "/tmp/kc")
    helm.upgrade_install(
        client,
        release="rel",
        chart="chart",
        repo="https://charts.example",
        version="1.2.3",
        namespace="ns",
        values={"nodeSelector": {"role": "system"}, "affinity": None},
        create_namespace=True,
    )
    helm.uninstall(client, "rel", "ns")
    install, uninstall = calls(fake_helm)
    args = install["args"]
    assert args[:11] == [
        "upgrade",
        "--install",
        "rel",
        "chart",
        "--repo",
        "https://charts.example",
        "--version",
        "1.2.3",
        "--namespace",
        "ns",
        "--create-namespace",
    ]
    assert args[-4:] == ["--kube-context", "standin", "--kubeconfig", "/tmp/kc"]
    assert yaml.safe_load(install["values"][0]) == {"nodeSelector": {"role": "system"}, "affinity": None}
    assert uninstall["args"] == [
        "uninstall",
        "rel",
        "--namespace",
        "ns",
        "--kube-context",
        "standin",
        "--kubeconfig",
        "/tmp/kc",
    ]


def test_a_helm_failure_carries_its_message(fake_helm):
    with pytest.raises(K8sError, match=r"helm fail x failed \(1\): Error: chart not found"):
        helm.run_helm(["fail", "x"])
