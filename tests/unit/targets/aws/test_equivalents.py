"""The CLI equivalents of what step 02 creates (raytrain_helpers.targets.aws.equivalents) and the documents
``raytrain-tutorial render`` writes for them.

Each ``aws`` command is read back the way the AWS CLI reads it - the operation and every ``--option`` are the API's
names in kebab case (awscli's clidriver builds them with botocore's ``xform_name(name, "-")``), JSON for a
structure, ``file://`` for a file's text - and the parameters are checked with botocore's own ParamValidator
against the service model: an unknown option, a missing required one or a wrong type fails here. Every file a
command names is one ``render --out`` wrote, and it parses.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import botocore.session
import pytest
import yaml
from botocore import xform_name
from botocore.validate import ParamValidator

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from raytrain_helpers.plan import manifests  # noqa: E402
from raytrain_helpers.targets.aws import equivalents  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402

#: The AWS CLI's command names that differ from the service's model name.
CLI_SERVICES = {"s3api": "s3"}


def api_call(argv: tuple[str, ...]) -> tuple[str, str, dict]:
    """(service, operation, params) of an ``aws SERVICE OPERATION --opt value ...`` command; KeyError for an
    option the operation does not have."""
    service = CLI_SERVICES.get(argv[1], argv[1])
    model = botocore.session.get_session().get_service_model(service)
    op = next(o for o in model.operation_names if xform_name(o, "-") == argv[2])
    shape = model.operation_model(op).input_shape
    members = {xform_name(m, "-"): m for m in shape.members}
    params: dict = {}
    args = iter(argv[3:])
    for flag in args:
        value = next(args)
        if flag == "--region":  # a global option of the CLI, not a parameter
            continue
        member = members[flag[2:]]
        if value.startswith("file://"):
            value = Path(value[len("file://") :]).read_text()
        elif shape.members[member].type_name in ("structure", "list", "map"):
            value = json.loads(value)
        params[member] = value
    report = ParamValidator().validate(params, shape)
    assert not report.has_errors(), f"{' '.join(argv[:3])}: {report.generate_report()}"
    return service, op, params


@pytest.fixture
def rendered(tmp_path):
    settings = make_settings(tmp_path)
    out = tmp_path / "rendered"
    manifests.write_all(settings, out, account="123456789012")
    return settings, out


@pytest.mark.parametrize("which", [equivalents.cli_equivalents, equivalents.teardown_equivalents])
def test_every_aws_command_is_a_valid_call_and_every_file_it_names_was_rendered(rendered, which):
    settings, out = rendered
    eqs = which(settings, docs=str(out), account="123456789012")
    for e in eqs:
        assert e.argv[0] in ("aws", "eksctl", "kubectl"), e
        if e.argv[:2] == ("aws", "s3"):  # `aws s3 rb`: the CLI's own command, not an API operation
            continue
        if e.argv[0] == "aws":
            api_call(e.argv)
        for arg in e.argv:
            if arg.startswith(str(out)) or arg.startswith(f"file://{out}"):
                path = Path(arg.removeprefix("file://"))
                assert path.exists(), arg
                if path.suffix == ".json":
                    json.loads(path.read_text())
                elif path.suffix == ".yaml":
                    assert yaml.safe_load(path.read_text())["kind"] == "ClusterConfig"


def test_the_commands_create_what_step_02_creates(rendered):
    settings, out = rendered
    calls = {
        (svc, op): params
        for svc, op, params in (
            api_call(e.argv) for e in equivalents.cli_equivalents(settings, docs=str(out), account="123456789012")
            if e.argv[0] == "aws"
        )
    }  # fmt: skip
    bucket = "raytrain-tutorial-123456789012-us-west-2"
    assert calls[("s3", "CreateBucket")] == {
        "Bucket": bucket,
        "CreateBucketConfiguration": {"LocationConstraint": "us-west-2"},
    }
    trust = json.loads(calls[("iam", "CreateRole")]["AssumeRolePolicyDocument"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    policy = json.loads(calls[("iam", "PutRolePolicy")]["PolicyDocument"])
    assert f"arn:aws:s3:::{bucket}" in json.dumps(policy)
    assert calls[("eks", "CreatePodIdentityAssociation")] == {
        "clusterName": "raytrain-tutorial",
        "namespace": settings.kubernetes.namespace,
        "serviceAccount": settings.kubernetes.service_account,
        "roleArn": "arn:aws:iam::123456789012:role/raytrain-tutorial-ray-train-raytrain-s3",
        "tags": {"raytrain-tutorial": "raytrain-tutorial"},
    }
    # the association's --cli-input-json body render wrote asks for the same association (tags aside)
    body = json.loads((out / "eks/pod-identity-association.json").read_text())
    assert body == {k: v for k, v in calls[("eks", "CreatePodIdentityAssociation")].items() if k != "tags"}


def test_irsa_and_us_east_1_change_the_commands(tmp_path):
    s = make_settings(tmp_path, pod_identity="irsa", region="us-east-1")
    eqs = equivalents.cli_equivalents(s)
    assert not any("pod-identity" in e.command for e in eqs)
    create = next(e for e in eqs if e.argv[2:3] == ("create-bucket",))
    assert "--create-bucket-configuration" not in create.argv  # S3 refuses LocationConstraint us-east-1
    assert not any("pod-identity" in e.command for e in equivalents.teardown_equivalents(s))
