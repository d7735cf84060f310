"""Step 02 on the aws target (raytrain_helpers.targets.aws.eks), against a moto server and a fake eksctl.

The server is moto's ThreadedMotoServer (tests/fakes/aws/moto_env.py): eksctl runs as a subprocess, so
it must reach moto over HTTP. tests/fakes/aws/eksctl is a small Python script standing in for eksctl: it
creates with boto3, in moto, what eksctl would (VPC, private/public subnets, NAT, EKS cluster and managed
node groups, CloudFormation stacks), enforces some of eksctl's rules (single AZ for efaEnabled, one of
subnets/availabilityZones), records its arguments and the config file it was given, and fails on request.
States moto never reaches by itself (CREATING, DELETING, CREATE_FAILED) are set in moto's backend
(in-process: the server thread shares it); Auto Scaling activities come from moto_ext's backend patch;
failure_causes is also checked with botocore's Stubber against responses shaped like the real API.
The decisions themselves are checked one state at a time in tests/unit/plan/test_eksctl.py.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import boto3
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[5]))

from raytrain_helpers.clients import aws as aws_client  # noqa: E402
from raytrain_helpers.clients.aws import AwsError  # noqa: E402
from raytrain_helpers.core.config import ConfigError  # noqa: E402
from raytrain_helpers.targets import aws as aws_target  # noqa: E402
from raytrain_helpers.targets.aws import common  # noqa: E402
from raytrain_helpers.targets.aws.eks import state as eks_state  # noqa: E402
from tests.fakes.aws import moto_ext  # noqa: E402
from tests.fakes.aws.fixtures import SECRETS, make_settings  # noqa: E402
from tests.fakes.k8s_standin import StandIn  # noqa: E402

#: The module (the package's ``cluster`` is the function of the same name).
aws_cluster = importlib.import_module("raytrain_helpers.targets.aws.eks")

pytestmark = pytest.mark.timeout(120)

R = "us-west-2"
NAME = "raytrain-tutorial"


@pytest.fixture(autouse=True)
def k8s_api(monkeypatch):
    """The cluster's Kubernetes API (the stand-in), which the kubeconfig the fake eksctl writes points at: 02 runs
    its storage check in a pod there before the GPU node group (tests/unit/targets/aws/eks/test_eks_storage_gate.py)."""
    st = StandIn("healthy", delay_s=0.05).start()
    monkeypatch.setenv("FAKE_EKSCTL_API_KUBECONFIG", st.kubeconfig)
    yield st
    st.stop()


def eks():
    return boto3.client("eks", region_name=R)


def ec2():
    return boto3.client("ec2", region_name=R)


def placed(tmp_path, az="us-west-2b", **params):
    """Settings plus the placement step 01 would have saved."""
    s = make_settings(tmp_path, **params)
    common.save_placement(
        s,
        dict(
            region=R,
            az=az,
            az_id="",
            instance_type=s.aws.gpu_node_type,
            gpu_node_count=2,
            account="123456789012",
            source="ranked",
        ),
    )
    return s


def ops(srv):
    return [" ".join(c["argv"][:2]) for c in srv.eksctl_calls()]


def test_plan_renders_configs_and_creates_nothing(srv, tmp_path, capsys):
    s = placed(tmp_path)
    res = aws_target.cluster(s, "plan")
    assert res.ok, res.problems
    assert srv.eksctl_calls() == []
    assert eks().list_clusters()["clusters"] == []
    assert [v for v in ec2().describe_vpcs()["Vpcs"] if not v.get("IsDefault")] == []
    assert not (tmp_path / "runs" / "tutorial" / "eksctl").exists()
    # the order of `up`: cluster, storage, the storage check, then the GPU node group (test_eks_storage_gate.py)
    assert len(res.actions) == 6 and "create EKS cluster" in res.actions[0] and "us-west-2b" in res.actions[5]
    assert [a.split(" ")[:3] for a in res.actions[1:5]] == [
        ["create", "S3", "bucket"],
        ["create", "IAM", "role"],
        ["associate", "raytrain-tutorial-ray-train-raytrain-s3", "with"],
        ["check", "the", "checkpoint"],
    ]
    c = yaml.safe_load(res.configs[aws_cluster.CLUSTER_CFG])
    assert c["apiVersion"] == "eksctl.io/v1alpha5" and c["kind"] == "ClusterConfig"
    assert c["metadata"] == {"name": NAME, "region": R, "version": "1.35", "tags": {"raytrain-tutorial": NAME}}
    assert c["availabilityZones"][0] == "us-west-2b" and len(c["availabilityZones"]) == 3
    offering = common.offering_azs(ec2(), "g6.12xlarge")
    assert set(c["availabilityZones"]) <= set(offering)
    assert c["iam"]["withOIDC"] is True and c["vpc"]["nat"]["gateway"] == "Single"
    assert {a["name"] for a in c["addons"]} == {"vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent"}
    (sys_ng,) = c["managedNodeGroups"]
    assert sys_ng["labels"] == {"role": "system"} and sys_ng["instanceType"] == "m7i.xlarge"
    assert sys_ng["privateNetworking"] is True and sys_ng["desiredCapacity"] == 1
    g = yaml.safe_load(res.configs[aws_cluster.GPU_CFG])["managedNodeGroups"][0]
    assert g["efaEnabled"] is True and g["minSize"] == g["maxSize"] == g["desiredCapacity"] == 2
    assert g["labels"] == {"role": "gpu-worker", "nvidia.com/gpu.present": "true"}
    res.show()
    assert "nothing was created" in capsys.readouterr().out


def test_up_creates_cluster_then_gpu_nodegroup_in_exactly_one_az(srv, tmp_path):
    s = placed(tmp_path)
    res = aws_target.cluster(s, "up", assume_yes=True)
    assert res.ok, (res.problems, res.causes)
    calls = srv.eksctl_calls()
    assert [c["argv"][:2] for c in calls] == [["create", "cluster"], ["create", "nodegroup"]]
    assert "--install-nvidia-plugin=false" in calls[1]["argv"]
    # eksctl got exactly the rendered configs, which were also written under runs/
    assert calls[0]["config"] == res.configs[aws_cluster.CLUSTER_CFG]
    assert calls[1]["config"] == Path(res.config_files[aws_cluster.GPU_CFG]).read_text()
    gcfg = yaml.safe_load(calls[1]["config"])["managedNodeGroups"][0]
    c = eks().describe_cluster(name=NAME)["cluster"]
    private = common.private_subnets_by_az(ec2(), c["resourcesVpcConfig"]["subnetIds"])
    assert gcfg["subnets"] == private["us-west-2b"] and "availabilityZones" not in gcfg
    ng = eks().describe_nodegroup(clusterName=NAME, nodegroupName="gpu-efa")["nodegroup"]
    assert ng["subnets"] == private["us-west-2b"] and ng["instanceTypes"] == ["g6.12xlarge"]
    assert ng["scalingConfig"] == {"minSize": 2, "maxSize": 2, "desiredSize": 2}
    assert ng["labels"] == {"role": "gpu-worker", "nvidia.com/gpu.present": "true"}
    assert ng["tags"]["fake-eksctl/efa-enabled"] == "true"
    sysng = eks().describe_nodegroup(clusterName=NAME, nodegroupName="system")["nodegroup"]
    assert sysng["labels"] == {"role": "system"}
    assert res.nodegroup("gpu-efa")["azs"] == ["us-west-2b"]
    assert Path(srv.env["KUBECONFIG"]).is_file()
    assert all(Path(p).is_file() for p in res.logs)


def test_up_again_changes_nothing(srv, tmp_path):
    s = placed(tmp_path)
    assert aws_target.cluster(s, "up", assume_yes=True).ok
    n = len(srv.eksctl_calls())
    res = aws_target.cluster(s, "up")  # nothing billable left: no confirmation needed
    assert res.ok
    assert ops(srv)[n:] == ["utils write-kubeconfig"]
    st = aws_target.cluster(s, "status")
    assert st.ok and st.cluster_status == "ACTIVE" and {n["name"] for n in st.nodegroups} == {"system", "gpu-efa"}


def test_up_without_confirmation_in_a_headless_run_creates_nothing(srv, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "interactive", lambda: False)
    s = placed(tmp_path)
    with pytest.raises(common.ConfirmationRefused, match="assume_yes=True"):
        aws_target.cluster(s, "up")
    assert srv.eksctl_calls() == [] and eks().list_clusters()["clusters"] == []


def test_missing_eksctl_is_a_clear_error_before_anything(srv, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent-bin")
    s = placed(tmp_path)
    # the target's `cluster up` meets the preflight first (tests/unit/targets/aws/test_preflight.py) ...
    with pytest.raises(AwsError, match=r"did not start: preflight \(aws\) failed: .*eksctl: MISSING"):
        aws_target.cluster(s, "up", assume_yes=True)
    # ... and the step itself still says so on its own
    with pytest.raises(AwsError, match="eksctl is not on PATH.*Install it"):
        aws_cluster.cluster(s, "up", assume_yes=True)
    assert eks().list_clusters()["clusters"] == []


def test_a_failing_eksctl_is_reported_and_up_resumes(srv, tmp_path, monkeypatch):
    s = placed(tmp_path)
    monkeypatch.setenv("FAKE_EKSCTL_FAIL", "create-nodegroup")
    res = aws_target.cluster(s, "up", assume_yes=True)
    assert not res.ok and res.cluster_status == "ACTIVE"
    assert any("exited 1" in p for p in res.problems)
    assert any("waiter state transitioned to Failure" in c for c in res.causes)
    monkeypatch.delenv("FAKE_EKSCTL_FAIL")
    res = aws_target.cluster(s, "up", assume_yes=True)
    assert res.ok
    assert ops(srv) == ["create cluster", "create nodegroup", "create nodegroup"]


def test_failed_nodegroup_is_reported_with_its_causes(srv, tmp_path):
    s = placed(tmp_path)
    assert aws_target.cluster(s, "up", assume_yes=True).ok
    info = moto_ext.set_nodegroup_state(
        R,
        NAME,
        "gpu-efa",
        "CREATE_FAILED",
        issues=[
            {
                "code": "AsgInstanceLaunchFailures",
                "message": "Could not launch On-Demand Instances.",
                "resourceIds": ["eks-gpu-efa-asg"],
            }
        ],
    )
    moto_ext.FAKE.activities[info["asg"]] = [
        {
            "ActivityId": "a1",
            "AutoScalingGroupName": info["asg"],
            "Cause": "scaling out",
            "StartTime": "2026-01-01T00:00:00Z",
            "StatusCode": "Failed",
            "Progress": 100,
            "Description": "Launching a new EC2 instance. Status Reason: capacity",
            "StatusMessage": "We currently do not have sufficient g6.12xlarge capacity in the Availability Zone "
            "you requested",
        }
    ]
    n = len(srv.eksctl_calls())
    st = aws_target.cluster(s, "status")
    assert not st.ok
    assert any("AsgInstanceLaunchFailures" in c for c in st.causes)
    assert any("do not have sufficient g6.12xlarge capacity" in c for c in st.causes)
    up = aws_target.cluster(s, "up", assume_yes=True)
    assert not up.ok and any("CREATE_FAILED" in p for p in up.problems)
    assert len(srv.eksctl_calls()) == n  # nothing attempted on a failed node group


def test_stuck_nodegroup_times_out_with_its_causes(srv, tmp_path, monkeypatch):
    s = placed(tmp_path)
    assert aws_target.cluster(s, "up", assume_yes=True).ok
    info = moto_ext.set_nodegroup_state(R, NAME, "gpu-efa", "CREATING")
    moto_ext.FAKE.activities[info["asg"]] = [
        {
            "ActivityId": "a2",
            "AutoScalingGroupName": info["asg"],
            "Cause": "scaling out",
            "Progress": 30,
            "StartTime": "2026-01-01T00:00:00Z",
            "StatusCode": "Cancelled",
            "Description": "Launching a new EC2 instance",
            "StatusMessage": "Could not launch On-Demand Instances. InsufficientInstanceCapacity",
        }
    ]
    monkeypatch.setattr(eks_state, "NODEGROUP_TIMEOUT_S", 0.3)
    res = aws_target.cluster(s, "up", assume_yes=True)
    assert not res.ok and any(p.startswith("stuck: node group gpu-efa: still CREATING") for p in res.problems)
    assert any("InsufficientInstanceCapacity" in c for c in res.causes)


def test_creating_cluster_is_waited_for(srv, tmp_path, monkeypatch):
    s = placed(tmp_path)
    assert aws_target.cluster(s, "up", assume_yes=True).ok
    moto_ext.set_cluster_state(R, NAME, "CREATING")
    seen = []
    real = aws_client.describe_cluster

    def describe(*args, **kwargs):  # the cluster turns ACTIVE once the step has seen it CREATING twice
        found = real(*args, **kwargs)
        seen.append(found and found["status"])
        if seen.count("CREATING") == 2:
            moto_ext.set_cluster_state(R, NAME, "ACTIVE")
        return found

    monkeypatch.setattr(aws_client, "describe_cluster", describe)
    res = aws_target.cluster(s, "up", assume_yes=True)
    assert res.ok and seen.count("CREATING") == 2 and seen[-1] == "ACTIVE"
    assert "wait for cluster" in res.actions[0]


def test_deleting_cluster_is_reported_and_left_alone(srv, tmp_path):
    s = placed(tmp_path)
    assert aws_target.cluster(s, "up", assume_yes=True).ok
    moto_ext.set_cluster_state(R, NAME, "DELETING")
    n = len(srv.eksctl_calls())
    res = aws_target.cluster(s, "up", assume_yes=True)
    assert not res.ok and any("being deleted" in p for p in res.problems)
    assert len(srv.eksctl_calls()) == n


def test_gpu_az_not_in_an_existing_cluster(srv, tmp_path, monkeypatch):
    s = placed(tmp_path, az="us-west-2a")
    monkeypatch.setenv("FAKE_EKSCTL_FAIL", "create-nodegroup")  # leaves a cluster without the GPU node group
    res = aws_target.cluster(s, "up", assume_yes=True)
    assert res.cluster_status == "ACTIVE" and res.nodegroup("gpu-efa") is None
    azs = yaml.safe_load(res.configs[aws_cluster.CLUSTER_CFG])["availabilityZones"]
    missing = next(z for z in common.offering_azs(ec2(), "g6.12xlarge") if z not in azs)
    monkeypatch.delenv("FAKE_EKSCTL_FAIL")
    n = len(srv.eksctl_calls())
    s2 = make_settings(tmp_path, gpu_az=missing)
    with pytest.raises(ConfigError, match=rf"no private subnet in the GPU AZ {missing}.*Fix: set gpu_az to one of"):
        aws_target.cluster(s2, "up", assume_yes=True)
    with pytest.raises(ConfigError):
        aws_target.cluster(s2, "plan")
    assert len(srv.eksctl_calls()) == n
    assert "gpu-efa" not in eks().list_nodegroups(clusterName=NAME)["nodegroups"]


def _reservation(itype="g6.12xlarge", az="us-west-2b", count=2, region=R):
    cr = boto3.client("ec2", region_name=region).create_capacity_reservation(
        InstanceType=itype,
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=az,
        InstanceCount=count,
        InstanceMatchCriteria="targeted",
    )
    return cr["CapacityReservation"]["CapacityReservationId"]


@pytest.mark.parametrize(
    "kind,match",
    [
        ("type", "reserves m7i.xlarge, the GPU nodes are g6.12xlarge"),
        ("az", "it is in us-west-2c, the GPU AZ is us-west-2b"),
        ("count", "only 1 of its instances are available, 2 are needed"),
        ("cancelled", "its state is 'cancelled'"),
        ("region", "was not found in us-west-2"),
    ],
)
def test_wrong_capacity_reservation_creates_nothing(srv, tmp_path, kind, match):
    rid = {
        "type": lambda: _reservation(itype="m7i.xlarge"),
        "az": lambda: _reservation(az="us-west-2c"),
        "count": lambda: _reservation(count=1),
        "cancelled": lambda: _reservation(),
        "region": lambda: _reservation(az="us-east-1a", region="us-east-1"),
    }[kind]()
    if kind == "cancelled":
        ec2().cancel_capacity_reservation(CapacityReservationId=rid)
    s = placed(tmp_path, capacity_reservation_id=rid)
    with pytest.raises(ConfigError, match=match):
        aws_target.cluster(s, "up", assume_yes=True)
    assert srv.eksctl_calls() == [] and eks().list_clusters()["clusters"] == []


def test_valid_capacity_reservation_is_targeted(srv, tmp_path):
    rid = _reservation()
    s = placed(tmp_path, capacity_reservation_id=rid)
    res = aws_target.cluster(s, "plan")
    assert res.ok and srv.eksctl_calls() == []
    g = yaml.safe_load(res.configs[aws_cluster.GPU_CFG])["managedNodeGroups"][0]
    assert g["capacityReservation"] == {"capacityReservationTarget": {"capacityReservationID": rid}}
    assert "instanceMarketOptions" not in g  # an On-Demand reservation, as EC2 reports it
    assert "in capacity reservation " + rid in res.actions[-1]  # the GPU node group, created last
    assert any(n.startswith(f"capacity reservation {rid} is an On-Demand Capacity Reservation") for n in res.notes)
    # told it is a Capacity Block, the plan refuses: EC2 says otherwise
    with pytest.raises(ConfigError, match="EC2 reports its type as 'default', aws.capacity_reservation_type says"):
        aws_target.cluster(
            placed(tmp_path, capacity_reservation_id=rid, capacity_reservation_type="capacity-block"), "plan"
        )


def test_a_capacity_block_read_from_ec2_renders_its_market_type_and_window(srv, tmp_path):
    import datetime as dt

    rid = _reservation()
    start = dt.datetime(2026, 12, 1, 11, 30, tzinfo=dt.timezone.utc)
    with moto_ext.FAKE.lock:  # what EC2 shows of a purchased block (PurchaseCapacityBlock is not in moto)
        moto_ext.FAKE.reservations[R][rid].update(
            ReservationType="capacity-block", StartDate=start, EndDate=start + dt.timedelta(days=7)
        )
    res = aws_target.cluster(placed(tmp_path, capacity_reservation_id=rid), "plan")
    assert res.ok, res.problems
    g = yaml.safe_load(res.configs[aws_cluster.GPU_CFG])["managedNodeGroups"][0]
    assert g["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert g["capacityReservation"] == {"capacityReservationTarget": {"capacityReservationID": rid}}
    assert any("starts 2026-12-01 11:30 UTC, ends 2026-12-08 11:30 UTC" in n for n in res.notes), res.notes
    # up: eksctl (the fake applies eksctl's rules for the market type) makes a node group of the block
    res = aws_target.cluster(placed(tmp_path, capacity_reservation_id=rid), "up", assume_yes=True)
    assert res.ok, res.problems
    tags = eks().describe_nodegroup(clusterName=NAME, nodegroupName="gpu-efa")["nodegroup"]["tags"]
    assert tags["fake-eksctl/capacity-type"] == "CAPACITY_BLOCK" and tags["fake-eksctl/capacity-reservation"] == rid


def test_plan_warns_when_the_version_costs_extended_support(srv, tmp_path, capsys):
    res = aws_target.cluster(placed(tmp_path, k8s_version="1.34"), "plan")  # extended support from 2026-12-02
    assert res.ok and srv.eksctl_calls() == []
    res.show()
    out = capsys.readouterr().out
    assert "note: WARNING: aws.k8s_version = '1.34'" in out and "-p k8s_version" in out


def test_placement_in_another_region_is_refused(srv, tmp_path):
    s = make_settings(tmp_path)
    common.save_placement(
        s,
        dict(
            region="us-east-1",
            az="us-east-1a",
            az_id="use1-az6",
            instance_type="g6.12xlarge",
            gpu_node_count=2,
            account="123456789012",
            source="ranked",
        ),
    )
    with pytest.raises(ConfigError, match="region is us-west-2. Fix: set `region: us-east-1`"):
        aws_target.cluster(s, "up", assume_yes=True)
    assert srv.eksctl_calls() == []


def test_no_placement_and_no_gpu_az(srv, tmp_path):
    s = make_settings(tmp_path)
    with pytest.raises(ConfigError, match="no GPU AZ chosen: run step 01"):
        aws_target.cluster(s, "up", assume_yes=True)
    plan = aws_target.cluster(s, "plan")
    assert not plan.ok and aws_cluster.CLUSTER_CFG in plan.configs and aws_cluster.GPU_CFG not in plan.configs
    assert srv.eksctl_calls() == []


def test_gpu_az_setting_wins_over_placement(srv, tmp_path):
    s = placed(tmp_path, az="us-west-2b", gpu_az="us-west-2c")
    res = aws_target.cluster(s, "plan")
    assert res.gpu_az == "us-west-2c" and res.gpu_az_source == "gpu_az setting"


def test_drift_of_an_existing_gpu_nodegroup_is_reported(srv, tmp_path):
    s = placed(tmp_path)
    assert aws_target.cluster(s, "up", assume_yes=True).ok
    s3 = placed(tmp_path, gpu_node_count=3)
    res = aws_target.cluster(s3, "up", assume_yes=True)
    assert not res.ok and any("differs from the settings" in p and "size 2/2/2" in p for p in res.problems)


def test_down_lists_what_is_left_when_deletion_fails(srv, tmp_path, monkeypatch):
    s = placed(tmp_path)
    assert aws_target.cluster(s, "up", assume_yes=True).ok
    monkeypatch.setenv("FAKE_EKSCTL_FAIL", "delete-cluster")
    res = aws_target.cluster(s, "down", assume_yes=True)
    assert not res.ok
    assert any(r.startswith(f"EKS cluster {NAME}") for r in res.remaining)
    assert any(r.startswith("VPC ") for r in res.remaining) and any("NAT gateway" in r for r in res.remaining)


def test_down_headless_without_assume_yes_refuses(srv, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "interactive", lambda: False)
    s = placed(tmp_path)
    assert aws_target.cluster(s, "up", assume_yes=True).ok
    with pytest.raises(common.ConfirmationRefused):
        aws_target.cluster(s, "down")
    assert eks().list_clusters()["clusters"] == [NAME]


def test_nodegroup_only_teardown(srv, tmp_path):
    s = placed(tmp_path)
    assert aws_target.cluster(s, "up", assume_yes=True).ok
    res = aws_target.teardown(s, assume_yes=True, nodegroup_only=True)
    assert res.ok and ops(srv)[-1] == "delete nodegroup"
    assert eks().list_nodegroups(clusterName=NAME)["nodegroups"] == ["system"]


def test_full_cycle_down_in_reverse_order_verified_and_no_credentials_anywhere(srv, tmp_path, capfd):
    s = placed(tmp_path)
    for action in ("plan", "up", "status"):
        res = aws_target.cluster(s, action, assume_yes=True)
        assert res.ok, (action, res.problems)
        res.show()
    probe = ec2().create_capacity_reservation(
        InstanceType="g6.12xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-west-2a",
        InstanceCount=1,
        TagSpecifications=[
            {"ResourceType": "capacity-reservation", "Tags": [{"Key": common.PROBE_TAG_KEY, "Value": "x"}]}
        ],
    )["CapacityReservation"]
    res = aws_target.cluster(s, "down", assume_yes=True)
    res.show()
    assert res.ok and res.remaining == [], res.remaining
    assert ops(srv)[-2:] == ["delete nodegroup", "delete cluster"]
    assert eks().list_clusters()["clusters"] == []
    assert ec2().describe_vpcs(Filters=[{"Name": "tag:alpha.eksctl.io/cluster-name", "Values": [NAME]}])["Vpcs"] == []
    cfn = boto3.client("cloudformation", region_name=R)
    assert {st["StackStatus"] for st in cfn.list_stacks()["StackSummaries"]} == {"DELETE_COMPLETE"}
    states = {
        c["CapacityReservationId"]: c["State"] for c in ec2().describe_capacity_reservations()["CapacityReservations"]
    }
    assert states[probe["CapacityReservationId"]] == "cancelled"
    again = aws_target.cluster(s, "down")  # nothing left: no confirmation, no eksctl
    assert again.ok and again.actions == ["nothing to delete"] and ops(srv)[-1] == "delete cluster"
    # credentials: never printed (also eksctl's output), saved, rendered or passed as arguments
    out = capfd.readouterr()
    files = "".join(p.read_text() for p in (tmp_path / "runs").rglob("*") if p.is_file())
    calls = srv.eksctl_log.read_text()
    assert "eksctl create cluster" in out.out and "deleted EKS cluster" in out.out
    for secret in SECRETS:
        assert secret not in out.out + out.err + files + calls


def test_failure_causes_with_stubbed_real_api_shapes(monkeypatch):
    """botocore Stubber: responses shaped like the real EKS / Auto Scaling / CloudFormation APIs."""
    import datetime as dt

    from botocore.stub import Stubber

    sess = boto3.session.Session(aws_access_key_id="a" * 20, aws_secret_access_key="b" * 40, region_name=R)
    made = {n: sess.client(n, region_name=R) for n in ("eks", "autoscaling", "cloudformation")}
    stubs = {n: Stubber(c) for n, c in made.items()}
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    stubs["eks"].add_response(
        "describe_nodegroup",
        {
            "nodegroup": {
                "nodegroupName": "gpu-efa",
                "clusterName": NAME,
                "status": "CREATE_FAILED",
                "resources": {"autoScalingGroups": [{"name": "eks-gpu-efa-1234"}]},
                "health": {
                    "issues": [
                        {
                            "code": "InsufficientFreeAddresses",
                            "message": "subnet has too few IPs",
                            "resourceIds": ["subnet-1"],
                        }
                    ]
                },
            }
        },
        {"clusterName": NAME, "nodegroupName": "gpu-efa"},
    )
    stubs["autoscaling"].add_response(
        "describe_scaling_activities",
        {
            "Activities": [
                {
                    "ActivityId": "1",
                    "AutoScalingGroupName": "eks-gpu-efa-1234",
                    "Cause": "c",
                    "StartTime": now,
                    "StatusCode": "Failed",
                    "StatusMessage": "InsufficientInstanceCapacity",
                },
                {
                    "ActivityId": "2",
                    "AutoScalingGroupName": "eks-gpu-efa-1234",
                    "Cause": "c",
                    "StartTime": now,
                    "StatusCode": "Successful",
                },
            ]
        },
        {"AutoScalingGroupName": "eks-gpu-efa-1234", "MaxRecords": 20},
    )
    stubs["cloudformation"].add_response(
        "describe_stack_events",
        {
            "StackEvents": [
                {
                    "StackId": "s",
                    "EventId": "e",
                    "StackName": f"eksctl-{NAME}-nodegroup-gpu-efa",
                    "Timestamp": now,
                    "LogicalResourceId": "ManagedNodeGroup",
                    "ResourceStatus": "CREATE_FAILED",
                    "ResourceStatusReason": "Resource handler returned message: NodeCreationFailure",
                }
            ]
        },
        {"StackName": f"eksctl-{NAME}-nodegroup-gpu-efa"},
    )
    for st in stubs.values():
        st.activate()
    monkeypatch.setattr(aws_client, "client", lambda _s, name, region=None: made[name])
    causes = aws_cluster.failure_causes(sess, R, NAME, "gpu-efa")
    assert causes == [
        "EKS health InsufficientFreeAddresses: subnet has too few IPs [subnet-1]",
        "Auto Scaling eks-gpu-efa-1234 Failed: InsufficientInstanceCapacity",
        f"CloudFormation eksctl-{NAME}-nodegroup-gpu-efa ManagedNodeGroup CREATE_FAILED: "
        "Resource handler returned message: NodeCreationFailure",
    ]
    for st in stubs.values():
        st.assert_no_pending_responses()


def test_cli_cluster(srv, tmp_path, capsys, monkeypatch):
    from raytrain_helpers import cli

    placed(tmp_path)
    env = str(tmp_path / "env.yaml")
    monkeypatch.setattr(common, "interactive", lambda: False)
    assert cli.main(["cluster", "plan", "--env-file", env, "--target", "aws"]) == 0
    assert "nothing was created" in capsys.readouterr().out
    assert cli.main(["cluster", "up", "--env-file", env, "--target", "aws"]) == 1
    assert "refusing" in capsys.readouterr().err and srv.eksctl_calls() == []
    assert cli.main(["cluster", "up", "--env-file", env, "--target", "aws", "--yes"]) == 0
    assert cli.main(["cluster", "status", "--env-file", env, "--target", "aws", "--json"]) == 0
    assert '"cluster_status": "ACTIVE"' in capsys.readouterr().out
    assert cli.main(["cluster", "down", "--env-file", env, "--target", "aws", "--yes"]) == 0
