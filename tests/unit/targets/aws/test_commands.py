"""The commands each step stands for on aws (raytrain_helpers.targets.aws.commands): each one names what the step
really does - the same wait, the same exec, the same objects, the same API parameters."""

from __future__ import annotations

import inspect
import json
import shlex
import sys
from pathlib import Path

import botocore.session
from botocore import xform_name

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from raytrain_helpers.plan import plugins as plan_plugins  # noqa: E402
from raytrain_helpers.targets.aws import commands, equivalents  # noqa: E402
from raytrain_helpers.targets.aws.jobs import efa_tools  # noqa: E402
from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay  # noqa: E402
from raytrain_helpers.targets.aws.placement.blocks import BLOCK_HOURS  # noqa: E402
from raytrain_helpers.targets.aws.plugins import owners as device_owners  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402


def _by_purpose(pairs, word):
    return next(command for purpose, command in pairs if word in purpose)


def test_the_head_wait_is_as_long_as_the_step_waits(tmp_path):
    """A multi-GB image pull on a fresh node takes minutes: the typed wait is 04's own (45 min), not 10."""
    wait = _by_purpose(commands.equivalent_commands(make_settings(tmp_path), "kuberay"), "wait for the head")
    step_wait = inspect.signature(kuberay.raycluster).parameters["timeout_s"].default
    assert step_wait == 45 * 60
    assert f"--timeout={int(step_wait)}s" in wait.split()


def test_fi_info_runs_in_the_pod_as_06_runs_it(tmp_path):
    """fi_info lives in /opt/amazon/efa/bin, which a `kubectl exec` has not on its PATH: the command is 06's own."""
    loop = _by_purpose(commands.equivalent_commands(make_settings(tmp_path), "verify"), "EFA provider")
    exec_part = loop.split(" exec $p -- ", 1)[1].split(" | ", 1)[0]
    assert shlex.split(exec_part) == efa_tools.fi_info_command("efa")
    assert efa_tools.EFA_BIN in exec_part and " fi_info -p efa" in exec_part


def test_the_efa_plugin_replaces_eksctls_before_installing_the_tutorials(tmp_path):
    pairs = commands.equivalent_commands(make_settings(tmp_path), "plugins")
    typed = [command for _, command in pairs]
    delete = next(i for i, c in enumerate(typed) if "delete daemonset" in c)
    release = plan_plugins.EFA_CHART["release"]
    install = next(i for i, c in enumerate(typed) if c.startswith(f"helm upgrade --install {release} "))
    assert delete < install
    assert typed[delete].split() == [
        "kubectl", "-n", device_owners.NAMESPACE, "delete", "daemonset", plan_plugins.EKSCTL_EFA_DAEMONSET,
        "--ignore-not-found",
    ]  # fmt: skip
    assert typed[delete].split()[5] == "aws-efa-k8s-device-plugin"  # eksctl's name (docs/pins.md)
    assert typed[install].split()[3] == plan_plugins.EFA_CHART["release"] == "raytrain-aws-efa-k8s-device-plugin"


def test_capacity_lists_the_capacity_block_offerings_with_the_apis_own_parameters(tmp_path):
    s = make_settings(tmp_path, gpu_node_count=3)
    argv = shlex.split(_by_purpose(commands.equivalent_commands(s, "capacity"), "Capacity Blocks"))
    assert argv[:3] == ["aws", "ec2", "describe-capacity-block-offerings"]
    options = dict(zip(argv[3::2], argv[4::2], strict=True))
    model = botocore.session.get_session().get_service_model("ec2")
    shape = model.operation_model("DescribeCapacityBlockOfferings").input_shape
    members = {xform_name(m, "-") for m in shape.members} | {"region"}
    assert {o[2:] for o in options} <= members
    assert {xform_name(m, "-") for m in shape.required_members} <= {o[2:] for o in options}
    assert options == {
        "--instance-type": s.aws.gpu_node_type,
        "--instance-count": "3",
        "--capacity-duration-hours": str(BLOCK_HOURS),
        "--region": s.aws.region,
    }


def _json_normal(argv):
    return [json.loads(w) if w[:1] in "{[" else w for w in argv]


def test_02_and_08_type_what_the_aws_equivalents_say_in_their_order(tmp_path):
    """The bucket, the role and the Pod Identity association come from targets.aws.equivalents: the same argv
    (JSON values equal), in the same order, none left out."""
    s = make_settings(tmp_path)
    for step, which in (("cluster", equivalents.cli_equivalents), ("teardown", equivalents.teardown_equivalents)):
        typed = [shlex.split(c) for _, c in commands.equivalent_commands(s, step)]
        expected = [e.argv for e in which(s, docs=commands.RENDERED) if e.argv[0] != "kubectl"]
        found = [argv for argv in typed if any(_json_normal(argv) == _json_normal(e) for e in expected)]
        assert [_json_normal(a) for a in found] == [_json_normal(e) for e in expected], step
        assert any(a[:3] == ["aws", "eks", "create-pod-identity-association"] for a in found) == (step == "cluster")
        assert any(a[:3] == ["aws", "iam", "delete-role"] for a in found) == (step == "teardown")


def test_the_source_articles_submission_stands_beside_the_port_forward(tmp_path):
    """05 on aws: the port-forward and `ray job submit` from this machine, and beside them the source article's way,
    the code copied into the head pod (selected by KubeRay's own labels) and submitted there to the pod's own Jobs
    API, with the same entrypoint."""
    s = make_settings(tmp_path)
    pairs = commands.equivalent_commands(s, "train")
    forward = _by_purpose(pairs, "Jobs API of the head")
    assert forward.startswith(f"kubectl -n {s.kubernetes.namespace} port-forward svc/")
    local = _by_purpose(pairs, "submit the job")
    article = _by_purpose(pairs, "source article")
    head = f"-l ray.io/cluster={s.kubernetes.ray_cluster_name},ray.io/node-type=head"
    assert head in article and "kubectl -n" in article and " cp runs/" in article
    exec_part = article[article.index(" exec $HEAD -- ") :]
    assert "ray job submit --address http://127.0.0.1:8265 --working-dir /tmp/raytrain-job" in exec_part
    assert local.split(" -- ", 1)[1] == exec_part.split(" -- ", 2)[2]  # the same entrypoint and config
