"""The eksctl plan (raytrain_helpers.plan.eksctl): the rendered configs, the cluster's AZs, and the pure decision
of what ``up`` does in each state of the cluster and its node groups (nothing is read or created here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from raytrain_helpers.plan import eksctl  # noqa: E402
from raytrain_helpers.plan.eksctl import NOT_FOUND, Observed, decide_actions  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402
from tests.schemas import eksctl_schema  # noqa: E402

CLUSTER_FILE = Path("/runs/tutorial/eksctl/cluster.yaml")
GPU_FILE = Path("/runs/tutorial/eksctl/gpu-nodegroup.yaml")
AZS = ["us-west-2b", "us-west-2a", "us-west-2c"]
PRIVATE = {"us-west-2a": ["subnet-a"], "us-west-2b": ["subnet-b1", "subnet-b2"], "us-west-2c": ["subnet-c"]}


@pytest.fixture
def settings(tmp_path):
    return make_settings(tmp_path)


def nodegroup(name, status="ACTIVE", *, count=2, az="us-west-2b", itype="g6.12xlarge", health=()):
    """A node group summary as the aws target reads it."""
    return dict(
        name=name,
        status=status,
        subnets=PRIVATE.get(az, []),
        azs=[az],
        size=f"{count}/{count}/{count}",
        scaling=dict(minSize=count, maxSize=count, desiredSize=count),
        instance_types=[itype],
        health=list(health),
    )


def system(status="ACTIVE"):
    return nodegroup("system", status, count=1, itype="m7i.xlarge")


def decide(settings, status, nodegroups=(), *, gpu_az="us-west-2b", private=None):
    observed = Observed(
        cluster_status=status,
        nodegroups=list(nodegroups),
        private_subnets=PRIVATE if private is None else private,
        gpu_az=gpu_az,
    )
    return decide_actions(settings, observed, azs=AZS, cluster_file=CLUSTER_FILE, gpu_file=GPU_FILE)


def kinds(decision):
    return [a.kind for a in decision.actions]


# --------------------------------------------------------------------------------------------------------------
# One state at a time
# --------------------------------------------------------------------------------------------------------------


def test_not_found_creates_the_cluster_then_the_gpu_nodegroup(settings):
    d = decide(settings, NOT_FOUND, private={})
    assert kinds(d) == [eksctl.CREATE_CLUSTER, eksctl.CREATE_GPU_NG]
    assert d.problems == [] and d.diagnose == []
    create = d.actions[0].description
    assert create.startswith("create EKS cluster raytrain-tutorial 1.35 in us-west-2 (AZs us-west-2b, us-west-2a, ")
    assert "node group 'system' (1 x m7i.xlarge)" in create and f"eksctl create cluster -f {CLUSTER_FILE}" in create
    gpu = d.actions[1].description
    assert gpu.startswith("create GPU node group 'gpu-efa' (2 x g6.12xlarge, EFA) in us-west-2b")
    assert gpu.endswith(f"eksctl create nodegroup -f {GPU_FILE} --install-nvidia-plugin=false")
    # the new cluster's subnet is not known yet: the shown config says so
    assert d.gpu_subnets == [] and d.gpu_config_subnets == ["<private subnet of the new cluster in us-west-2b>"]
    assert d.billable == d.descriptions


def test_not_found_without_a_gpu_az_plans_only_the_cluster(settings):
    d = decide(settings, NOT_FOUND, gpu_az=None, private={})
    assert kinds(d) == [eksctl.CREATE_CLUSTER] and d.gpu_config_subnets is None


@pytest.mark.parametrize("status", ["CREATING", "UPDATING"])
def test_creating_cluster_is_waited_for_then_completed(settings, status):
    d = decide(settings, status)
    assert kinds(d) == [eksctl.WAIT_CLUSTER, eksctl.CREATE_SYSTEM_NG, eksctl.CREATE_GPU_NG]
    assert d.actions[0].description == f"wait for cluster raytrain-tutorial ({status}) to become ACTIVE"
    assert "--include system" in d.actions[1].description
    assert d.gpu_subnets == d.gpu_config_subnets == ["subnet-b1", "subnet-b2"]
    assert d.billable == d.descriptions[1:]


def test_active_and_complete_only_refreshes_the_kubeconfig(settings):
    d = decide(settings, "ACTIVE", [system(), nodegroup("gpu-efa")])
    assert kinds(d) == [eksctl.KUBECONFIG] and d.problems == [] and d.billable == []
    assert d.gpu_subnets == ["subnet-b1", "subnet-b2"] and d.gpu_config_subnets is None


def test_active_without_the_gpu_nodegroup_creates_it_in_the_cluster_subnets(settings, tmp_path):
    d = decide(settings, "ACTIVE", [system()])
    assert kinds(d) == [eksctl.CREATE_GPU_NG]
    assert d.gpu_subnets == d.gpu_config_subnets == ["subnet-b1", "subnet-b2"]
    reserved = make_settings(tmp_path, capacity_reservation_id="cr-0123456789abcdef0")
    d = decide(reserved, "ACTIVE", [system()])
    assert d.actions[0].description.endswith(", in capacity reservation cr-0123456789abcdef0")


def test_active_without_any_nodegroup_creates_both(settings):
    assert kinds(decide(settings, "ACTIVE")) == [eksctl.CREATE_SYSTEM_NG, eksctl.CREATE_GPU_NG]


@pytest.mark.parametrize("status", ["CREATING", "UPDATING"])
def test_gpu_nodegroup_in_progress_is_waited_for(settings, status):
    d = decide(settings, "ACTIVE", [system(), nodegroup("gpu-efa", status)])
    assert kinds(d) == [eksctl.WAIT_GPU_NG] and d.billable == []
    assert d.actions[0].description == f"wait for GPU node group 'gpu-efa' ({status})"


def test_deleting_gpu_nodegroup_is_waited_out_then_created_again(settings):
    d = decide(settings, "ACTIVE", [system(), nodegroup("gpu-efa", "DELETING")])
    assert kinds(d) == [eksctl.WAIT_GPU_NG_GONE, eksctl.CREATE_GPU_NG]
    assert d.actions[1].description == "then create it again in us-west-2b"
    assert d.gpu_config_subnets == ["subnet-b1", "subnet-b2"]
    d = decide(settings, "ACTIVE", [system(), nodegroup("gpu-efa", "DELETING")], gpu_az=None)
    assert kinds(d) == [eksctl.WAIT_GPU_NG_GONE] and d.gpu_config_subnets is None


def test_deleting_cluster_is_a_problem_and_nothing_is_done(settings):
    d = decide(settings, "DELETING", [system(), nodegroup("gpu-efa")])
    assert d.actions == [] and d.diagnose == []
    assert d.problems == [
        "cluster raytrain-tutorial is being deleted. Fix: wait for it to go (`cluster down` waits and verifies), "
        "then run `up` again"
    ]


def test_failed_cluster_is_diagnosed_and_nothing_is_done(settings):
    d = decide(settings, "FAILED")
    assert d.actions == [] and d.diagnose == [None]
    assert d.problems == ["cluster raytrain-tutorial is FAILED. Fix: `cluster down` (deletes it), then `up`"]


@pytest.mark.parametrize("status", eksctl.FAILED_NG)
def test_failed_system_nodegroup_is_diagnosed(settings, status):
    d = decide(settings, "ACTIVE", [system(status), nodegroup("gpu-efa")])
    assert d.diagnose == ["system"] and kinds(d) == [eksctl.KUBECONFIG]  # nothing billable; problems stop `up`
    assert d.problems == [f"node group 'system' is {status}. Fix: `cluster down`, then `up`"]


@pytest.mark.parametrize("status", eksctl.FAILED_NG)
def test_failed_gpu_nodegroup_is_diagnosed_with_its_health(settings, status):
    issue = "AsgInstanceLaunchFailures: Could not launch On-Demand Instances."
    d = decide(settings, "ACTIVE", [system(), nodegroup("gpu-efa", status, health=[issue])])
    assert d.diagnose == ["gpu-efa"] and kinds(d) == [eksctl.KUBECONFIG]
    (problem,) = d.problems
    assert problem.startswith(f"GPU node group 'gpu-efa' is {status} ({issue}). Fix: see the causes; then ")
    assert "cluster down --nodegroup-only --yes" in problem


def test_every_failure_is_reported_at_once(settings):
    d = decide(settings, "ACTIVE", [system("DEGRADED"), nodegroup("gpu-efa", "CREATE_FAILED")])
    assert d.diagnose == ["system", "gpu-efa"] and len(d.problems) == 2


# --------------------------------------------------------------------------------------------------------------
# Drift of an existing GPU node group
# --------------------------------------------------------------------------------------------------------------


def test_matching_gpu_nodegroup_has_no_drift(settings):
    assert eksctl.drift(settings, nodegroup("gpu-efa"), "us-west-2b") is None
    assert eksctl.drift(settings, nodegroup("gpu-efa"), None) is None


def test_drift_in_size_type_and_az_is_one_problem(settings):
    ng = nodegroup("gpu-efa", count=3, az="us-west-2a", itype="g6.48xlarge")
    problem = eksctl.drift(settings, ng, "us-west-2b")
    assert problem.startswith("the existing GPU node group 'gpu-efa' differs from the settings: ")
    assert "instance type g6.48xlarge (settings: g6.12xlarge)" in problem
    assert "size 3/3/3 (settings: 2 fixed)" in problem
    assert "AZ us-west-2a (settings/placement: us-west-2b)" in problem
    d = decide(settings, "ACTIVE", [system(), ng])
    assert d.problems == [problem] and kinds(d) == [eksctl.KUBECONFIG]


# --------------------------------------------------------------------------------------------------------------
# AZs and rendering
# --------------------------------------------------------------------------------------------------------------


def test_cluster_azs_start_with_the_gpu_az_and_skip_unsupported_ones():
    zones = {
        "us-east-1a": dict(id="use1-az1", state="available"),
        "us-east-1b": dict(id="use1-az3", state="available"),  # no EKS control plane there
        "us-east-1c": dict(id="use1-az4", state="impaired"),
        "us-east-1d": dict(id="use1-az5", state="available"),
    }
    unsupported = frozenset({"use1-az3"})
    assert eksctl.cluster_azs("us-east-1d", ["us-east-1b", "us-east-1d"], zones, unsupported) == [
        "us-east-1d",
        "us-east-1a",
    ]
    offering = ["us-east-1a", "us-east-1c", "us-east-1d"]
    assert eksctl.cluster_azs("us-east-1a", offering, zones, unsupported) == ["us-east-1a", "us-east-1d"]


def test_rendered_configs(settings):
    c = yaml.safe_load(eksctl.render_cluster_config(settings, azs=AZS, gpu_az="us-west-2b"))
    assert c["kind"] == "ClusterConfig" and c["availabilityZones"] == AZS
    assert [ng["name"] for ng in c["managedNodeGroups"]] == [eksctl.SYSTEM_NODEGROUP]
    g = yaml.safe_load(eksctl.render_gpu_nodegroup_config(settings, gpu_az="us-west-2b", subnet_ids=["subnet-b1"]))
    (ng,) = g["managedNodeGroups"]
    assert ng["subnets"] == ["subnet-b1"] and ng["efaEnabled"] is True and "capacityReservation" not in ng


# --------------------------------------------------------------------------------------------------------------
# The rendered configs against eksctl's own schema (schemas/eksctl/v0.230.0/schema.json, what `eksctl utils schema`
# prints; draft-07, additionalProperties false on every eksctl type)
# --------------------------------------------------------------------------------------------------------------

CR = "cr-0123456789abcdef0"


def eksctl_errors(text):
    import jsonschema

    validator = jsonschema.Draft7Validator(eksctl_schema())
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(yaml.safe_load(text))]


def gpu_config(tmp_path, reservation_type="", **params):
    s = make_settings(tmp_path, **params)
    text = eksctl.render_gpu_nodegroup_config(
        s, gpu_az="us-west-2b", subnet_ids=["subnet-b1"], reservation_type=reservation_type
    )
    return text, yaml.safe_load(text)["managedNodeGroups"][0]


def test_cluster_config_is_valid_for_eksctl(settings):
    text = eksctl.render_cluster_config(settings, azs=AZS, gpu_az="us-west-2b")
    assert eksctl_errors(text) == []
    assert yaml.safe_load(text)["metadata"]["version"] == settings.aws.k8s_version == "1.35"


def test_cluster_enforces_network_policies_and_denies_pods_the_metadata_service(tmp_path, settings):
    import json

    doc = yaml.safe_load(eksctl.render_cluster_config(settings, azs=AZS, gpu_az="us-west-2b"))
    (cni,) = [a for a in doc["addons"] if a["name"] == "vpc-cni"]
    # eksctl passes configurationValues to EKS as it is: a JSON string, the value a string as the add-on's own
    # schema wants it (EKS User Guide: {"enableNetworkPolicy": "true"})
    assert json.loads(cni["configurationValues"]) == {"enableNetworkPolicy": "true"}
    _, gpu = gpu_config(tmp_path)
    for ng in [*doc["managedNodeGroups"], gpu]:
        assert ng["disablePodIMDS"] is True, ng["name"]
        # eksctl refuses disablePodIMDS beside iam.withAddonPolicies or a launch template (validation.go)
        assert "iam" not in ng and "launchTemplate" not in ng
    broken = dict(doc, addons=[dict(cni, configurationValues={"enableNetworkPolicy": True})])
    assert eksctl_errors(yaml.safe_dump(broken))  # the schema wants a string


@pytest.mark.parametrize(
    "params, from_ec2, market",
    [
        ({}, "", None),  # no reservation
        (dict(capacity_reservation_id=CR), "default", None),  # an ODCR, type read from EC2
        (dict(capacity_reservation_id=CR), "", None),  # offline, type unknown: rendered as an ODCR, and says so
        (dict(capacity_reservation_id=CR, capacity_reservation_type="default"), "", None),
        (dict(capacity_reservation_id=CR), "capacity-block", "capacity-block"),  # a Capacity Block read from EC2
        (dict(capacity_reservation_id=CR, capacity_reservation_type="capacity-block"), "", "capacity-block"),
    ],
)
def test_gpu_nodegroup_config_is_valid_for_eksctl(tmp_path, params, from_ec2, market):
    text, ng = gpu_config(tmp_path, from_ec2, **params)
    assert eksctl_errors(text) == []
    assert ng.get("instanceMarketOptions") == (None if market is None else {"marketType": market})
    if params:
        assert ng["capacityReservation"] == {"capacityReservationTarget": {"capacityReservationID": CR}}
    else:
        assert "capacityReservation" not in ng
    # eksctl's ValidateNodeGroup (v0.230.0 validation.go): instanceMarketOptions only beside capacityReservation,
    # and the node group of a block has exactly one instance type (managed_nodegroup.go)
    assert "instanceMarketOptions" not in ng or ("capacityReservation" in ng and "instanceTypes" not in ng)
    assert ("set aws.capacity_reservation_type" in text) == (bool(params) and not from_ec2 and len(params) == 1)


def test_capacity_block_setting_wins_and_is_in_the_plan(tmp_path):
    _, ng = gpu_config(tmp_path, "default", capacity_reservation_id=CR, capacity_reservation_type="capacity-block")
    assert ng["instanceMarketOptions"] == {"marketType": "capacity-block"}
    s = make_settings(tmp_path, capacity_reservation_id=CR, capacity_reservation_type="capacity-block")
    d = decide(s, "ACTIVE", [system()])
    assert d.actions[0].description.endswith(f", in capacity reservation {CR} (a Capacity Block)")


def test_a_reservation_type_without_a_reservation_is_refused(tmp_path):
    from raytrain_helpers.core.config import ConfigError

    with pytest.raises(ConfigError, match="capacity_reservation_type 'capacity-block' is set without a capacity_res"):
        make_settings(tmp_path, capacity_reservation_type="capacity-block")
    with pytest.raises(ConfigError, match="capacity_reservation_type"):
        make_settings(tmp_path, capacity_reservation_id=CR, capacity_reservation_type="block")
