"""clients.helm: the arguments helm gets (pinned chart, values file, the client's context and kubeconfig), and
its failures as K8sError, with a fake ``helm`` that records what it was asked."""

from __future__ import annotations

import hashlib
import json
import stat
import sys
from pathlib import Path

import pytest
import yaml

from raytrain_helpers.clients import helm
from raytrain_helpers.clients.kubernetes import K8sError

ARCHIVE = b"\x1f\x8b a chart archive"
ARCHIVE_SHA = hashlib.sha256(ARCHIVE).hexdigest()


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
opt = lambda name: args[args.index(name) + 1]
if args[0] == "pull":  # helm writes <destination>/<basename of the chart's URL>
    open(opt("--destination") + "/chart-1.2.3.tgz", "wb").write({ARCHIVE!r})
if args[:2] == ["repo", "add"]:  # helm downloads the index to <cache>/<name>-index.yaml
    import os
    os.makedirs(opt("--repository-cache"), exist_ok=True)
    entry = {{"name": "chart", "version": "1.2.3", "digest": {ARCHIVE_SHA!r}}}
    open(opt("--repository-cache") + "/" + args[2] + "-index.yaml", "w").write(
        json.dumps({{"apiVersion": "v1", "entries": {{"chart": [entry]}}}}))
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


def _install(digest: str, client=None):
    return helm.upgrade_install(
        client or FakeClient("standin", "/tmp/kc"),
        release="rel",
        chart="chart",
        repo="https://charts.example",
        version="1.2.3",
        digest=digest,
        namespace="ns",
        values={"nodeSelector": {"role": "system"}, "affinity": None},
        create_namespace=True,
        digest_fix="pin the new digest",
    )


def test_upgrade_install_pulls_checks_and_installs_the_archive_with_the_values(fake_helm):
    client = FakeClient("standin", "/tmp/kc")
    _install(ARCHIVE_SHA, client)
    helm.uninstall(client, "rel", "ns")
    pull, install, uninstall = calls(fake_helm)
    assert pull["args"][:7] == [
        "pull",
        "chart",
        "--repo",
        "https://charts.example",
        "--version",
        "1.2.3",
        "--destination",
    ]
    args = install["args"]
    assert args[:3] == ["upgrade", "--install", "rel"] and args[3].endswith("/chart-1.2.3.tgz")
    assert args[4:8] == ["--namespace", "ns", "--create-namespace", "-f"]
    assert "--repo" not in args and "--version" not in args  # the checked archive, not the repository again
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


def test_an_archive_with_another_digest_is_not_installed(fake_helm):
    with pytest.raises(
        helm.ChartDigestError, match=rf"sha256 is {ARCHIVE_SHA}, expected 0{{64}} \(pinned\).*Fix: pin the new"
    ):
        _install("0" * 64)
    assert [c["args"][0] for c in calls(fake_helm)] == ["pull"]  # never `upgrade`


def test_without_a_pinned_digest_the_repositorys_index_decides(fake_helm):
    _install("")
    add, pull, install = calls(fake_helm)
    assert add["args"][:4] == ["repo", "add", "raytrain-verify", "https://charts.example"]
    assert "--repository-config" in add["args"] and "--repository-cache" in add["args"]  # not the learner's
    assert pull["args"][0] == "pull" and install["args"][:2] == ["upgrade", "--install"]


def test_a_helm_failure_carries_its_message(fake_helm):
    with pytest.raises(K8sError, match=r"helm fail x failed \(1\): Error: chart not found"):
        helm.run_helm(["fail", "x"])
