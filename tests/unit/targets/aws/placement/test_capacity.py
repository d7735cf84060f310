"""Step 01 on the aws target (raytrain_helpers.targets.aws.placement.capacity), against moto.

moto 5.2.1 provides: EC2 instance type offerings per AZ, instance types (with GPU and EFA facts), AZs,
regions, instances, VPCs/subnets/route tables, EKS, STS. It lacks EC2 Service Quotas, Spot placement
scores and capacity reservations: tests/fakes/aws/moto_ext.py adds them to moto's own response classes
(backend patch, responses serialized by moto from botocore's model), with state the tests seed.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
from pathlib import Path

import boto3
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[5]))

from raytrain_helpers.core import config as core_config  # noqa: E402
from raytrain_helpers.core.config import ConfigError  # noqa: E402
from raytrain_helpers.plan import cost  # noqa: E402
from raytrain_helpers.targets.aws import common  # noqa: E402
from tests.fakes.aws import moto_ext  # noqa: E402
from tests.fakes.aws.fixtures import SECRETS, make_settings  # noqa: E402

#: The module (the package's ``capacity`` is the function of the same name).
aws_capacity = importlib.import_module("raytrain_helpers.targets.aws.placement.capacity")
#: Where the probe's test seam ``probe_hook`` lives (``probe_az`` reads it there).
capacity_probe = importlib.import_module("raytrain_helpers.targets.aws.placement.probe")

pytestmark = pytest.mark.timeout(120)

R = "us-west-2"


def ec2(region=R):
    return boto3.client("ec2", region_name=region)


def reservations(region=R):
    return ec2(region).describe_capacity_reservations()["CapacityReservations"]


def test_ranks_azs_saves_placement_plans_memory_and_cost(mocked_aws, tmp_path, capsys):
    moto_ext.set_spot_scores(R, "g6.12xlarge", {"us-west-2b": 8, "us-west-2a": 5, "us-west-2c": 2})
    s = make_settings(tmp_path)
    rep = aws_capacity.capacity(s, regions=[R])
    assert rep.ok, rep.problems
    assert [r.az for r in rep.rows][:3] == ["us-west-2b", "us-west-2a", "us-west-2c"]
    assert {r.az for r in rep.rows} == {"us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"}
    top = rep.rows[0]
    assert top.gpu_quota.limit == 192 and top.gpu_quota.used == 0 and top.gpu_quota.need == 96
    assert top.cluster_subnet is None  # no cluster yet
    # the type's real facts, from ec2:DescribeInstanceTypes
    assert (rep.facts.gpus, rep.facts.vcpus, rep.facts.efa_supported) == (4, 48, True)
    assert "L4" in rep.facts.gpu_model and 20 < rep.facts.gpu_mem_gib < 24
    # the placement file that step 02 reads
    p = common.placement_path(s)
    assert p == tmp_path / "runs" / "tutorial" / "placement.json"
    saved = common.load_placement(s)
    assert saved["region"] == R and saved["az"] == "us-west-2b" and saved["az_id"] == top.az_id
    assert saved["account"] == "123456789012" and saved["source"] == "ranked"
    assert saved["ranked_azs"][:3] == ["us-west-2b", "us-west-2a", "us-west-2c"]  # where 02 falls back, in order
    # memory plan on the real GPU memory; world = 2 nodes x 4 GPUs
    assert rep.plan.world_size == 8 and rep.plan.device_mem_gib == pytest.approx(rep.facts.gpu_mem_gib)
    # cost of the whole stack from the dated table
    assert rep.cost.total_per_hour == pytest.approx(2 * 4.6016 + 0.2016 + 0.10 + 0.045)
    # read-only: nothing was created
    assert reservations() == [] and ec2().describe_instances()["Reservations"] == []
    rep.show()
    out = capsys.readouterr().out
    assert "us-west-2b" in out and "capacity: OK" in out and "placement:" in out


def test_short_quota_gives_the_exact_increase_request(mocked_aws, tmp_path):
    moto_ext.FAKE.quotas[(R, "L-DB2E81BA")] = 96.0
    ec2().run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="g6.12xlarge")
    s = make_settings(tmp_path)
    rep = aws_capacity.capacity(s, regions=[R])
    assert not rep.ok and rep.recommendation is None
    q = rep.rows[0].gpu_quota
    assert (q.used, q.limit, q.need, q.ok) == (48, 96, 96, False)
    assert rep.quota_requests == [
        "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-DB2E81BA "
        "--desired-value 144 --region us-west-2"
    ]
    assert all(r.verdict.startswith("SHORT") for r in rep.rows)
    assert not common.placement_path(s).exists()


def test_quota_falls_back_to_the_aws_default(mocked_aws, tmp_path):
    # eu-central-1 has no applied quota in the seed: the default (0 for G and VT) applies
    s = make_settings(tmp_path)
    rep = aws_capacity.capacity(s, regions=["eu-central-1"]) if _offered("eu-central-1") else None
    if rep is None:
        pytest.skip("moto data has no g6.12xlarge in eu-central-1")
    assert rep.rows[0].gpu_quota.source == "default" and rep.rows[0].gpu_quota.limit == 0
    assert not rep.ok
    moto_ext.FAKE.default_quotas["L-DB2E81BA"] = 200.0
    rep = aws_capacity.capacity(s, regions=["eu-central-1"])
    assert rep.rows[0].gpu_quota.limit == 200 and rep.ok


def _offered(region):
    return bool(common.offering_azs(ec2(region), "g6.12xlarge"))


def test_unused_reservations_count_against_the_quota(mocked_aws, tmp_path):
    ec2().create_capacity_reservation(
        InstanceType="g6.12xlarge", InstancePlatform="Linux/UNIX", AvailabilityZone="us-west-2a", InstanceCount=2
    )
    rep = aws_capacity.capacity(make_settings(tmp_path), regions=[R])
    assert rep.rows[0].gpu_quota.used == 96  # 2 x 48 vCPUs reserved but unused
    assert rep.ok  # 192 - 96 >= 96


def test_spot_score_flagged_when_spot_quota_caps_it(mocked_aws, tmp_path):
    moto_ext.set_spot_scores(R, "g6.12xlarge", {"us-west-2a": 9})
    moto_ext.FAKE.quotas[(R, "L-3819A6DF")] = 16.0
    rep = aws_capacity.capacity(make_settings(tmp_path), regions=[R])
    row = next(r for r in rep.rows if r.az == "us-west-2a")
    assert row.spot_score == 9 and row.spot_capped
    assert any("capped" in n for n in rep.notes)


def test_spot_scores_unreadable_is_a_row_not_a_failure(mocked_aws, tmp_path, capsys):
    moto_ext.FAKE.deny.add(f"spot:{R}")
    rep = aws_capacity.capacity(make_settings(tmp_path), regions=[R])
    assert rep.ok and all(r.spot_score is None for r in rep.rows)
    line = "unavailable: UnauthorizedOperation for ec2:GetSpotPlacementScores; " + aws_capacity.INSTEAD["spot"]
    assert [u.line() for u in rep.unavailable] == [line]
    rep.show()
    assert line in capsys.readouterr().out


def test_gpus_per_node_disagreeing_with_ec2_is_rejected(mocked_aws, tmp_path, monkeypatch):
    # the offline table says 8 (so the settings load), EC2 says 4
    monkeypatch.setitem(
        core_config.INSTANCE_TYPES, "g6.12xlarge", dict(core_config.INSTANCE_TYPES["g6.12xlarge"], gpus=8)
    )
    s = make_settings(tmp_path, gpus_per_node=8)
    with pytest.raises(ConfigError, match=r"gpus_per_node.*= 8.*has 4 x .*L4.*Fix: set gpus_per_node: 4"):
        aws_capacity.capacity(s, regions=[R], probe=True, assume_yes=True)
    assert reservations() == [] and not common.placement_path(s).exists()


def test_unknown_region_is_one_clear_error(mocked_aws, tmp_path):
    with pytest.raises(ConfigError, match="unknown region 'xx-nowhere-1'"):
        aws_capacity.capacity(make_settings(tmp_path), regions=["xx-nowhere-1"])


def test_type_not_offered_anywhere(mocked_aws, tmp_path):
    s = make_settings(tmp_path)
    with pytest.raises(ConfigError, match=r"g6.12xlarge is not offered in any AZ of eu-west-1, us-west-1"):
        aws_capacity.capacity(s, regions=["eu-west-1", "us-west-1"], probe=True, assume_yes=True)
    assert reservations("eu-west-1") == [] and not common.placement_path(s).exists()


def test_pinned_gpu_az_must_offer_the_type(mocked_aws, tmp_path):
    s = make_settings(tmp_path, gpu_node_type="g5.12xlarge", gpu_az="us-west-2d")
    with pytest.raises(ConfigError, match=r"gpu_az.*us-west-2d.*does not offer g5.12xlarge"):
        aws_capacity.capacity(s, regions=[R])


def test_pinned_gpu_az_wins_over_the_ranking(mocked_aws, tmp_path):
    moto_ext.set_spot_scores(R, "g6.12xlarge", {"us-west-2b": 9, "us-west-2a": 1})
    s = make_settings(tmp_path, gpu_az="us-west-2a")
    rep = aws_capacity.capacity(s, regions=[R])
    assert rep.rows[0].az == "us-west-2b"
    assert rep.recommendation["az"] == "us-west-2a" and rep.recommendation["source"] == "gpu_az"
    assert common.load_placement(s)["az"] == "us-west-2a"


def _cluster_with_subnets(azs):
    """A cluster whose VPC has private subnets (route to a NAT gateway) only in ``azs``."""
    e = ec2()
    vpc = e.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    pub = e.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24", AvailabilityZone=azs[0])["Subnet"]["SubnetId"]
    igw = e.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    e.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
    prt = e.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    e.create_route(RouteTableId=prt, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    e.associate_route_table(RouteTableId=prt, SubnetId=pub)
    nat = e.create_nat_gateway(SubnetId=pub, AllocationId=e.allocate_address(Domain="vpc")["AllocationId"])
    qrt = e.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    e.create_route(RouteTableId=qrt, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat["NatGateway"]["NatGatewayId"])
    privs = []
    for i, az in enumerate(azs):
        sid = e.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{10 + i}.0/24", AvailabilityZone=az)["Subnet"]["SubnetId"]
        e.associate_route_table(RouteTableId=qrt, SubnetId=sid)
        privs.append(sid)
    role = boto3.client("iam").create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    boto3.client("eks", region_name=R).create_cluster(
        name="raytrain-tutorial", roleArn=role, resourcesVpcConfig={"subnetIds": privs + [pub]}
    )
    return privs, pub


def test_az_without_a_cluster_subnet_is_not_recommended(mocked_aws, tmp_path):
    privs, pub = _cluster_with_subnets(["us-west-2a", "us-west-2b"])
    assert common.private_subnets_by_az(ec2(), privs + [pub]) == {"us-west-2a": [privs[0]], "us-west-2b": [privs[1]]}
    moto_ext.set_spot_scores(R, "g6.12xlarge", {"us-west-2c": 10, "us-west-2a": 4})
    rep = aws_capacity.capacity(make_settings(tmp_path), regions=[R])
    by_az = {r.az: r for r in rep.rows}
    assert by_az["us-west-2c"].cluster_subnet is False and not by_az["us-west-2c"].viable
    assert by_az["us-west-2a"].cluster_subnet is True
    assert rep.recommendation["az"] == "us-west-2a"


def test_memory_plan_that_does_not_fit_is_a_problem(mocked_aws, tmp_path):
    s = make_settings(tmp_path, model_preset="qwen2.5-1.5b", seq_len=8192, batch_size=16)
    rep = aws_capacity.capacity(s, regions=[R])
    assert rep.plan.fits is False and not rep.ok
    assert any("exceeds 90%" in p for p in rep.problems)


def test_price_overrides(mocked_aws, tmp_path):
    """The override reaches the report's estimate (the table itself: tests/unit/plan/test_cost.py)."""
    s = make_settings(tmp_path)
    rep = aws_capacity.capacity(s, regions=[R], prices={"instances": {"g6.12xlarge": 1.0}, "nat_gateway": 0.0})
    assert rep.cost.total_per_hour == pytest.approx(2 * 1.0 + 0.2016 + 0.10)
    assert rep.cost.total_per_hour != cost.estimate(s, R).total_per_hour


# --------------------------------------------------------------------------------------------
# The probe
# --------------------------------------------------------------------------------------------


def test_probe_needs_confirmation_in_a_headless_run(mocked_aws, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "interactive", lambda: False)
    s = make_settings(tmp_path)
    with pytest.raises(common.ConfirmationRefused, match="assume_yes=True"):
        aws_capacity.capacity(s, regions=[R], probe=True)
    assert reservations() == []
    assert not any(c[0] == "CreateCapacityReservation" for c in moto_ext.FAKE.calls)


def test_probe_confirms_capacity_and_cancels_everything(mocked_aws, tmp_path):
    moto_ext.set_spot_scores(R, "g6.12xlarge", {"us-west-2b": 9, "us-west-2a": 5, "us-west-2c": 4})
    moto_ext.FAKE.capacity[(R, "us-west-2b", "g6.12xlarge")] = 1  # only one instance free in 2b
    s = make_settings(tmp_path)
    rep = aws_capacity.capacity(s, regions=[R], probe=True, assume_yes=True)
    status = {p.az: p.status for p in rep.probes}
    assert status == {"us-west-2b": "no capacity", "us-west-2a": "confirmed", "us-west-2c": "confirmed"}
    assert all(p.cancelled for p in rep.probes)
    assert rep.rows[0].az == "us-west-2a" and rep.rows[0].tier == 0
    assert rep.recommendation["az"] == "us-west-2a" and rep.recommendation["probe_confirmed"]
    crs = reservations()
    assert len(crs) == 2 and {c["State"] for c in crs} == {"cancelled"}
    assert all(c["TotalInstanceCount"] == 2 for c in crs)
    assert all({t["Key"] for t in c["Tags"]} >= {common.PROBE_TAG_KEY} for c in crs)


def _probe_once(tmp_path, **kw):
    s = make_settings(tmp_path, gpu_az="us-west-2a")
    return aws_capacity.capacity(s, regions=[R], probe=True, assume_yes=True, **kw)


def test_probe_cancels_on_an_injected_exception(mocked_aws, tmp_path, monkeypatch):
    def boom(rid):
        assert [c["State"] for c in reservations()] == ["active"]
        raise RuntimeError("injected failure after the reservation was made")

    monkeypatch.setattr(capacity_probe, "probe_hook", boom)
    with pytest.raises(RuntimeError, match="injected"):
        _probe_once(tmp_path)
    crs = reservations()
    assert len(crs) == 1 and crs[0]["State"] == "cancelled"


def test_probe_cancels_on_keyboard_interrupt(mocked_aws, tmp_path, monkeypatch):
    def interrupt(rid):
        raise KeyboardInterrupt

    monkeypatch.setattr(capacity_probe, "probe_hook", interrupt)
    with pytest.raises(KeyboardInterrupt):
        _probe_once(tmp_path)
    assert [c["State"] for c in reservations()] == ["cancelled"]


@pytest.mark.parametrize("sig,exc", [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, SystemExit)])
def test_probe_cancels_on_a_real_signal_then_reraises(mocked_aws, tmp_path, monkeypatch, sig, exc):
    seen = []

    def deliver(rid):
        os.kill(os.getpid(), sig)  # what Ctrl-C / a kernel interrupt / kill do
        seen.append(rid)  # the handler deferred it: cleanup still runs

    monkeypatch.setattr(capacity_probe, "probe_hook", deliver)
    before = signal.getsignal(sig)
    with pytest.raises(exc):
        _probe_once(tmp_path)
    assert seen and [c["State"] for c in reservations()] == ["cancelled"]
    assert signal.getsignal(sig) is before  # handlers restored


def test_probe_cancels_leftovers_of_an_earlier_killed_probe(mocked_aws, tmp_path):
    old = ec2().create_capacity_reservation(
        InstanceType="g6.12xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-west-2c",
        InstanceCount=2,
        TagSpecifications=[
            {"ResourceType": "capacity-reservation", "Tags": [{"Key": common.PROBE_TAG_KEY, "Value": "killed-run"}]}
        ],
    )
    _probe_once(tmp_path)
    states = {c["CapacityReservationId"]: c["State"] for c in reservations()}
    assert states[old["CapacityReservation"]["CapacityReservationId"]] == "cancelled"
    assert set(states.values()) == {"cancelled"}


# --------------------------------------------------------------------------------------------
# CLI and safety
# --------------------------------------------------------------------------------------------


def test_cli_capacity_json_and_text(mocked_aws, tmp_path, capsys):
    from raytrain_helpers import cli

    make_settings(tmp_path)
    env = str(tmp_path / "env.yaml")
    rc = cli.main(["capacity", "--env-file", env, "--target", "aws", "--regions", "us-west-2,us-east-1", "--json"])
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert rc == 0 and data["ok"] and set(data["regions_checked"]) == {"us-west-2", "us-east-1"}
    assert data["recommendation"]["instance_type"] == "g6.12xlarge"
    assert "AWS account 123456789012" in out.err  # progress on stderr, JSON alone on stdout
    rc = cli.main(["capacity", "--env-file", env, "--target", "aws", "--regions", "us-west-2"])
    assert rc == 0 and "capacity: OK" in capsys.readouterr().out
    rc = cli.main(["capacity", "--env-file", env, "--target", "aws", "--regions", "nowhere-9"])
    assert rc == 2 and "unknown region" in capsys.readouterr().err


def test_no_credential_is_printed_or_saved(mocked_aws, tmp_path, capsys):
    s = make_settings(tmp_path)
    rep = aws_capacity.capacity(s, regions=[R], probe=True, assume_yes=True)
    rep.show()
    text = capsys.readouterr()
    saved = common.placement_path(s).read_text() + json.dumps(rep.as_dict(), default=str)
    for secret in SECRETS:
        assert secret not in text.out + text.err + saved
