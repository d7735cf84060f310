"""The aws preflight (raytrain_helpers.targets.aws.preflight), ``raytrain-tutorial check`` and the gate of the
billable steps.

The tools are shell scripts on a PATH of their own that print what the real tools print (the samples below, each
with where its shape comes from); the credentials and the quota come from moto (STS natively; the EC2 quota codes
through tests/fakes/aws/moto_ext, which answers GetServiceQuota / GetAWSDefaultServiceQuota in the API's shape).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from raytrain_helpers import cli  # noqa: E402
from raytrain_helpers.core.constants import EKSCTL_MIN_VERSION  # noqa: E402
from raytrain_helpers.targets import aws as aws_target  # noqa: E402
from tests.fakes.aws import moto_ext  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402

pf = importlib.import_module("raytrain_helpers.targets.aws.preflight")

pytestmark = pytest.mark.timeout(120)
R = "us-west-2"
REPO = Path(__file__).resolve().parents[4]

#: ``aws --version`` of AWS CLI v1, measured on this machine (2026-12-04).
AWS_V1 = "aws-cli/1.45.11 Python/3.11.7 Linux/6.18.44-fc-v1252 botocore/1.43.11"
#: AWS CLI v2: ``aws-cli/<version> Python/<version> <platform> exe/<arch>...`` (the line eksctl parses with
#: ``aws-cli/([\d.]*)``, eksctl-io/eksctl pkg/utils/kubeconfig/kubeconfig.go getAWSCLIVersion).
AWS_V2 = "aws-cli/2.22.35 Python/3.12.6 Linux/6.8.0-1021-aws exe/x86_64.ubuntu.24"
#: ``kubectl version --client -o json``, measured on this machine: note ``minor`` "32+" (a vendor build).
KUBECTL_JSON = json.dumps(
    {
        "clientVersion": {
            "major": "1",
            "minor": "32+",
            "gitVersion": "v1.32.4-dispatcher",
            "gitCommit": "4cb5f0764b8d5f425645c6f433394fede34a8a26",
            "platform": "linux/amd64",
        },
        "kustomizeVersion": "v5.5.0",
    },
    indent=2,
)


def kubectl_json(git_version: str) -> str:
    return KUBECTL_JSON.replace("v1.32.4-dispatcher", git_version)


@pytest.mark.parametrize(
    ("parse", "output", "version"),
    [
        (pf.parse_aws_cli, AWS_V1, "1.45.11"),
        (pf.parse_aws_cli, AWS_V2, "2.22.35"),
        (pf.parse_aws_cli, "aws: command not found", None),
        # eksctl version: GetVersion() - a release, a snapshot (+commit.date), a release candidate
        (pf.parse_eksctl, "0.230.0\n", "0.230.0"),
        (pf.parse_eksctl, "0.231.0-dev+99984adb.2026-08-21T17:14:27Z\n", "0.231.0"),
        (pf.parse_eksctl, "0.205.0-rc.0\n", "0.205.0"),
        # helm version --short: "%s+g%s" of version and commit[:7], or the version alone
        (pf.parse_helm, "v3.16.3+gcfd0749\n", "3.16.3"),
        (pf.parse_helm, "v4.2.4+g3900f43\n", "4.2.4"),  # helm v4.2.4 pkg/cmd/version.go formatVersion
        (pf.parse_helm, "v3.17.0\n", "3.17.0"),
        (pf.parse_kubectl, KUBECTL_JSON, "1.32.4"),
        (pf.parse_kubectl, kubectl_json("v1.33.5-eks-113cf36"), "1.33.5"),
        (pf.parse_kubectl, "Client Version: v1.29.2\nKustomize Version: v5.0.4", "1.29.2"),
        # aws-iam-authenticator version (the format eksctl's kubeconfig.go documents)
        (pf.parse_authenticator, '{"Version":"0.5.5","Commit":"85e50980d9d916ae95882176c18f14ae145f916f"}', "0.5.5"),
    ],
)
def test_versions_are_read_from_each_tools_own_output(parse, output, version):
    assert parse(output) == version


@pytest.fixture
def tools(tmp_path, monkeypatch):
    """A PATH holding only the tools a test writes: ``tools(aws=AWS_V2, eksctl="0.230.0", ...)``."""
    cat = shutil.which("cat")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    names = {"aws": "aws", "eksctl": "eksctl", "helm": "helm", "kubectl": "kubectl", "auth": "aws-iam-authenticator"}

    def write(**outputs):
        for key, text in outputs.items():
            exe = bin_dir / names[key]
            (tmp_path / f"{key}.out").write_text(text + "\n")
            script = f"exec {cat} '{tmp_path / f'{key}.out'}'\n"
            if key == "helm":  # `helm version` says the text; the rest is the fake helm (show chart, pull...)
                fake = REPO / "tests" / "fakes" / "helm.py"
                script = f'if [ "$1" = version ]; then {script}fi\nexec "{sys.executable}" "{fake}" "$@"\n'
            exe.write_text(f"#!/bin/sh\n{script}")
            exe.chmod(0o755)

    return write


def _rows(settings, **kw):
    return {r.what: r for r in pf.preflight(settings, quota=False, **kw).rows if not r.what.startswith("AWS cred")}


def test_every_tool_present_and_recent_enough(tools, tmp_path, mocked_aws):
    tools(aws=AWS_V2, eksctl="0.230.0", helm="v3.16.3+gcfd0749", kubectl=kubectl_json("v1.34.1"))
    res = pf.preflight(make_settings(tmp_path, k8s_version="1.33"))
    by = {r.what: r for r in res.rows}
    assert res.ok, res.summary()
    assert [by["AWS CLI (aws)"].found, by["eksctl"].found, by["helm"].found, by["kubectl"].found] == [
        "2.22.35",
        "0.230.0",
        "3.16.3",
        "1.34.1",
    ]
    assert by["AWS credentials"].found == "123456789012 arn:aws:sts::123456789012:user/moto"
    # moto_ext's account: G and VT 192 vCPUs applied, Standard 64; 2 x g6.12xlarge = 96, 1 x m7i.xlarge = 4
    assert by[f"G and VT vCPU quota ({R})"].found == "192 (applied, L-DB2E81BA)"
    assert by[f"G and VT vCPU quota ({R})"].needed == "96 (2 x g6.12xlarge)"
    assert by[f"Standard vCPU quota ({R})"].status == "ok"


@pytest.mark.parametrize(
    ("outputs", "what", "status"),
    [
        (dict(eksctl="0.204.1"), "eksctl", "TOO OLD"),
        (dict(eksctl="0.217.0"), "eksctl", "TOO OLD"),  # its stacks are unprotected: not what the tests model
        (dict(eksctl="0.231.0-dev+99984adb.2026-08-21T17:14:27Z"), "eksctl", "TOO NEW"),  # newer than the fake
        (dict(eksctl="0.230.0"), "eksctl", "ok"),
        (dict(helm="v4.2.4+g3900f43"), "helm", "ok"),
        (dict(helm="v4.3.0+gabcdef0"), "helm", "TOO NEW"),
        (dict(aws="aws-cli/2.12.2 Python/3.11.4 Linux/6.1 exe/x86_64.amzn.2023"), "AWS CLI (aws)", "TOO OLD"),
        (dict(aws="aws-cli/1.27.159 Python/3.9.16 Linux/6.1 botocore/1.29.159"), "AWS CLI (aws)", "TOO OLD"),
        (dict(aws=AWS_V1), "AWS CLI (aws)", "TOO OLD"),
        (dict(helm="v2.17.0+ga690bad"), "helm", "TOO OLD"),
        (dict(helm="v3.12.3+g3a31588"), "helm", "TOO OLD"),  # no --labels (the release label marks the tutorial's)
        (dict(aws="Segmentation fault"), "AWS CLI (aws)", "unknown"),
    ],
)
def test_a_too_old_or_unreadable_tool_is_named(tools, tmp_path, outputs, what, status):
    tools(**{"aws": AWS_V2, "eksctl": EKSCTL_MIN_VERSION, "helm": "v3.16.3+gcfd0749", **outputs})
    row = _rows(make_settings(tmp_path))[what]
    assert row.status == status
    assert row.blocks == (status not in ("ok", "unknown"))
    if status in ("TOO OLD", "TOO NEW"):
        wanted = {"AWS CLI (aws)": "v2", "helm": "helm 3.13 to 4.2.4", "eksctl": "releases/download/v0.230.0/"}
        assert "install" in row.fix and wanted[what] in row.fix


def test_aws_cli_v1_is_refused_with_the_v2_install(tools, tmp_path):
    tools(aws=AWS_V1, eksctl=EKSCTL_MIN_VERSION, helm="v3.16.3+gcfd0749")
    row = _rows(make_settings(tmp_path))["AWS CLI (aws)"]
    assert (row.found, row.needed, row.status, row.blocks) == ("1.45.11", "v2 >= 2.12.3", "TOO OLD", True)
    assert "v1" in row.fix and "pip uninstall awscli" in row.fix and "awscli-exe-linux-x86_64.zip" in row.fix


def test_missing_tools_and_which_of_them_stop_the_run(tools, tmp_path):
    tools()  # an empty PATH
    rows = _rows(make_settings(tmp_path))
    assert {w: (r.status, r.blocks) for w, r in rows.items()} == {
        "AWS CLI (aws)": ("MISSING", True),
        "eksctl": ("MISSING", True),
        "helm": ("MISSING", True),  # steps 03 and 04 install with it
        "kubectl": ("MISSING", False),  # the tutorial talks to the API itself
    }


def test_kubectl_must_be_within_one_minor_of_the_cluster(tools, tmp_path):
    tools(kubectl=KUBECTL_JSON)  # 1.32.4
    assert _rows(make_settings(tmp_path, k8s_version="1.33"))["kubectl"].status == "ok"
    row = _rows(make_settings(tmp_path, k8s_version="1.34"))["kubectl"]
    assert (row.status, row.needed, row.blocks) == ("TOO FAR", "1.33 to 1.35 (cluster 1.34)", False)
    assert "install kubectl 1.34" in row.fix


def test_with_aws_iam_authenticator_on_path_the_aws_cli_is_not_needed_for_the_token(tools, tmp_path):
    tools(auth='{"Version":"0.6.29","Commit":"abc"}', eksctl="0.230.0")
    rows = _rows(make_settings(tmp_path))
    assert rows["aws-iam-authenticator"].status == "ok"
    assert rows["AWS CLI (aws)"].status == "MISSING" and not rows["AWS CLI (aws)"].blocks
    tools(auth='{"Version":"0.5.2","Commit":"abc"}')
    assert _rows(make_settings(tmp_path))["aws-iam-authenticator"].status == "TOO OLD"


def test_no_credentials_is_a_failed_row(tools, tmp_path, monkeypatch):
    tools(aws=AWS_V2, eksctl="0.230.0")
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    res = pf.preflight(make_settings(tmp_path))
    cred = next(r for r in res.rows if r.what == "AWS credentials")
    assert (cred.status, cred.found) == ("FAILED", "no AWS credentials found")
    assert "aws sso login" in cred.fix and not res.ok
    assert not any("quota" in r.what for r in res.rows)  # nothing asked of AWS without an identity


def test_a_quota_below_the_node_groups_is_short_with_the_request_command(tools, tmp_path, mocked_aws):
    tools(aws=AWS_V2, eksctl="0.230.0")
    mocked_aws.quotas[(R, "L-DB2E81BA")] = 48.0
    res = pf.preflight(make_settings(tmp_path))
    row = next(r for r in res.rows if r.what.startswith("G and VT"))
    assert row.status == "SHORT" and row.blocks and not res.ok
    assert row.fix == (
        "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-DB2E81BA "
        f"--desired-value 96 --region {R}"
    )


def test_an_unreadable_quota_is_unknown_and_does_not_stop_the_run(tools, tmp_path, mocked_aws):
    tools(aws=AWS_V2, eksctl="0.230.0", helm="v3.16.3+gcfd0749")
    mocked_aws.deny.add(f"quotas:{R}")
    res = pf.preflight(make_settings(tmp_path))
    row = next(r for r in res.rows if r.what.startswith("G and VT"))
    assert row.status == "unknown" and row.found.startswith("unreadable: AccessDenied") and res.ok


def test_check_prints_one_table_and_its_exit_code_follows_the_required_rows(tools, tmp_path, mocked_aws, capsys):
    make_settings(tmp_path)  # copies env.yaml into tmp_path
    env = ["--env-file", str(tmp_path / "env.yaml")]
    tools(aws=AWS_V2, eksctl="0.230.0")
    assert cli.main(["check", "--target", "aws", *env]) == 1  # helm missing: 03 and 04 install with it
    out = capsys.readouterr().out
    assert out.count("What the aws path needs on this machine") == 1
    assert "Fix helm: install helm 3.13 to 4.2.4" in out and "helm: MISSING" in out
    tools(helm="v3.16.3+gcfd0749")
    assert cli.main(["check", "--target", "aws", *env]) == 0  # kubectl missing: optional
    out = capsys.readouterr().out
    assert "Fix kubectl:" in out and "preflight (aws): OK" in out
    tools(eksctl="0.204.0")
    assert cli.main(["check", "--target", "aws", *env]) == 1
    out = capsys.readouterr().out
    assert "eksctl: TOO OLD (found 0.204.0; needs 0.218.0 to 0.230.0)" in out
    assert cli.main(["check", "--target", "aws", "--json", *env]) == 1
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["what"] for r in rows if r["blocks"]] == ["eksctl"]


def test_the_billable_steps_refuse_to_start_when_the_preflight_failed(tools, tmp_path, mocked_aws):
    tools(aws=AWS_V2, eksctl="0.204.0")
    s = make_settings(tmp_path)
    with pytest.raises(pf.PreflightError, match=r"^step 02 `cluster up` .* did not start: .*eksctl: TOO OLD"):
        aws_target.cluster(s, "up", assume_yes=True)
    with pytest.raises(pf.PreflightError, match=r"^the capacity probe .* did not start"):
        aws_target.capacity(s, probe=True, assume_yes=True, regions=[R])
    assert moto_ext.FAKE.reservations == {}  # nothing was reserved
    import boto3

    assert boto3.client("eks", region_name=R).list_clusters()["clusters"] == []
    # reading what exists never waits on the preflight
    assert aws_target.capacity(s, regions=[R], save=False).rows


# --------------------------------------------------------------------------------------------
# IAM permissions: iam:SimulatePrincipalPolicy (moto 5.2.1 lacks it: botocore's Stubber, the documented shape)
# --------------------------------------------------------------------------------------------

ROLE_SESSION = "arn:aws:sts::123456789012:assumed-role/Learner/alice"


def _simulated(monkeypatch, arn: str, respond):
    """permissions_row for a caller ``arn``, IAM answering through ``respond(stubber, wanted)``."""
    from botocore.stub import Stubber

    from raytrain_helpers.clients import aws as aws_client
    from raytrain_helpers.plan import learner_policy

    monkeypatch.setattr(aws_client, "identity", lambda sess, region: aws_client.Identity("123456789012", arn, R))
    sess = aws_client.session(R)
    iam_api = aws_client.client(sess, "iam", R)
    with Stubber(iam_api) as stub:
        respond(stub, learner_policy.all_actions())
        row = pf.permissions_row(_settings_for_permissions(), sess)
        stub.assert_no_pending_responses()
    return row


def _settings_for_permissions():
    from raytrain_helpers.core import config

    return config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, target="aws")


class PolicySimulator:
    """iam:SimulatePrincipalPolicy as the IAM API reference documents it (API_SimulatePrincipalPolicy.html): each
    action of ``ActionNames`` evaluated for each ARN of ``ResourceArns`` (default ``*``), with the
    ``ContextEntries`` as the request's context; here the principal's policy is ``policy``, decided by
    plan.iam_eval. Records each call."""

    def __init__(self, policy):
        self.policy, self.calls = policy, []

    def can_paginate(self, operation):
        return False

    def simulate_principal_policy(self, PolicySourceArn, ActionNames, ResourceArns=("*",), ContextEntries=()):  # noqa: N803 (the API's names)
        from raytrain_helpers.plan import iam_eval

        self.calls.append((list(ActionNames), list(ResourceArns)))
        ctx = {e["ContextKeyName"]: e["ContextKeyValues"][0] for e in ContextEntries}
        decision = {iam_eval.ALLOW: "allowed", iam_eval.IMPLICIT_DENY: "implicitDeny"}
        results = [
            {
                "EvalActionName": a,
                "EvalResourceName": r,
                "EvalDecision": decision[iam_eval.decide(self.policy, a, r, ctx)],
            }
            for a in ActionNames
            for r in ResourceArns
        ]
        return {"EvaluationResults": results, "IsTruncated": False}


def _simulated_policy(monkeypatch, policy):
    from raytrain_helpers.clients import aws as aws_client

    monkeypatch.setattr(
        aws_client, "identity", lambda sess, region: aws_client.Identity("123456789012", ROLE_SESSION, R)
    )
    fake = PolicySimulator(policy)
    monkeypatch.setattr(aws_client, "client", lambda sess, service, region=None: fake)
    return pf.permissions_row(_settings_for_permissions(), aws_client.session(R)), fake


def test_the_permissions_row_names_the_actions_the_identity_cannot_perform(monkeypatch):
    from raytrain_helpers.plan import learner_policy

    policy = learner_policy.learner_policy()
    policy["Statement"] = [
        st for st in policy["Statement"] if st["Action"] not in ("iam:PassRole", "s3:DeleteObjectVersion")
    ]
    row, _ = _simulated_policy(monkeypatch, policy)
    assert row.status == "FAILED" and not row.blocks
    assert row.found.startswith("2 of ") and row.found.endswith(
        "not allowed for arn:aws:iam::123456789012:role/Learner: iam:PassRole, s3:DeleteObjectVersion"
    )
    assert "docs/iam/learner-policy.json" in row.fix


def test_the_scoped_actions_are_simulated_on_the_tutorials_own_resources(monkeypatch):
    """The committed policy passes the simulation; the same policy written for another cluster's names does not:
    the scoped actions are asked about this run's role, bucket and stacks, with the tag and the service."""
    from raytrain_helpers.plan import learner_policy

    row, fake = _simulated_policy(monkeypatch, learner_policy.learner_policy())
    assert row.status == "ok", row.found
    asked = {r for _, resources in fake.calls for r in resources}
    assert "arn:aws:iam::123456789012:role/raytrain-tutorial-ray-train-raytrain-s3" in asked
    assert "arn:aws:s3:::raytrain-tutorial-123456789012-us-west-2" in asked
    row, _ = _simulated_policy(monkeypatch, learner_policy.learner_policy("someone-else"))
    assert row.status == "FAILED"
    denied = row.found.split(": ", 1)[1].split(", ")
    assert sorted(denied) == sorted(a for a in learner_policy.all_actions() if a in learner_policy.SCOPES)


def test_a_denied_simulation_is_could_not_check_not_a_failure(monkeypatch):
    def respond(stub, wanted):
        stub.add_client_error("simulate_principal_policy", "AccessDenied", "not authorized", 403)

    row = _simulated(monkeypatch, "arn:aws:iam::123456789012:user/alice", respond)
    assert row.status == "unknown" and not row.blocks
    assert row.found == "could not check: iam:SimulatePrincipalPolicy answered AccessDenied"


def test_the_root_user_is_not_simulated(monkeypatch):
    root = _simulated(monkeypatch, "arn:aws:iam::123456789012:root", lambda stub, wanted: None)
    assert root.status == "unknown" and root.found.startswith("could not check for arn:aws:iam::123456789012:root")


def test_the_fakes_model_the_newest_versions_the_preflight_accepts():
    """The fake eksctl and helm print the release they model, and that release is the newest the preflight accepts:
    a learner's newer tool is refused rather than trusted on tests that modelled an older one."""
    import subprocess
    import sys
    from pathlib import Path

    from raytrain_helpers.core.constants import EKSCTL_MODELLED_VERSION
    from tests.fakes import helm as fake_helm

    fakes = Path(__file__).resolve().parents[3] / "fakes"
    env = {k: v for k, v in os.environ.items() if k != "FAKE_EKSCTL_VERSION"}
    said = subprocess.run([sys.executable, str(fakes / "aws" / "eksctl"), "version"], capture_output=True, text=True,
                          env=env, check=True).stdout  # fmt: skip
    assert pf.parse_eksctl(said) == EKSCTL_MODELLED_VERSION
    assert pf.parse_helm(fake_helm.VERSION) == pf.HELM_MODELLED


def test_each_helm_chart_is_resolved_at_its_pinned_version_before_anything_bills(tools, tmp_path, mocked_aws):
    """`helm show chart CHART --repo URL --version V` for the three charts: one row each; a version the
    repository does not publish is a blocking row naming the setting to change."""
    tools(aws=AWS_V2, eksctl="0.230.0", helm="v3.16.3+gcfd0749", kubectl=kubectl_json("v1.34.1"))
    by = {r.what: r for r in pf.preflight(make_settings(tmp_path, k8s_version="1.33")).rows}
    assert by["Helm chart kuberay-operator"].found == "1.7.0 resolved (digest from the index)"
    assert by["Helm chart nvidia-device-plugin"].found.startswith("0.20.0 resolved (sha256 9e5642bcdd38")
    assert by["Helm chart aws-efa-k8s-device-plugin"].status == "ok"
    res = pf.preflight(make_settings(tmp_path, k8s_version="1.33", efa_device_plugin_version="v0.5.99"))
    row = {r.what: r for r in res.rows}["Helm chart aws-efa-k8s-device-plugin"]
    assert row.status == "FAILED" and row.blocks and not res.ok
    assert 'chart "aws-efa-k8s-device-plugin" matching v0.5.99 not found' in row.found
    assert "versions.efa_device_plugin_version" in row.fix and "versions.efa_device_plugin_chart_digest" in row.fix
