"""What the aws target's steps share: confirmation, regions, the placement file, the cluster's subnets."""

from __future__ import annotations

import sys
from pathlib import Path

import boto3
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from raytrain_helpers.clients.aws import AwsError, Identity  # noqa: E402
from raytrain_helpers.core.config import ConfigError  # noqa: E402
from raytrain_helpers.targets.aws import common  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402

pytestmark = pytest.mark.timeout(120)

R = "us-west-2"


def test_confirm_interactive_answers():
    ident = Identity(account="123456789012", arn="arn:aws:iam::123456789012:user/x", region=R)
    common.confirm("do it", ident, assume_yes=False, input_fn=lambda _: "yes")
    with pytest.raises(common.ConfirmationRefused, match="nothing was done"):
        common.confirm("do it", ident, assume_yes=False, input_fn=lambda _: "no")


def test_confirm_refuses_headless_without_assume_yes(monkeypatch, capsys):
    ident = Identity(account="123456789012", arn="arn:aws:iam::123456789012:user/x", region=R)
    monkeypatch.setattr(common, "interactive", lambda: False)
    with pytest.raises(common.ConfirmationRefused, match="assume_yes=True") as e:
        common.confirm("do it", ident, assume_yes=False, details=["one thing"])
    assert isinstance(e.value, AwsError)  # one except clause catches every AWS failure
    out = capsys.readouterr().out
    assert "About to: do it" in out and "in AWS account 123456789012" in out and "  - one thing" in out
    common.confirm("do it", ident, assume_yes=True)
    assert "confirmed by assume_yes=True" in capsys.readouterr().out


def test_validate_regions_defaults_to_enabled(mocked_aws):
    e = boto3.client("ec2", region_name=R)
    regions = common.validate_regions(e, None, R)
    assert R in regions and len(regions) > 10
    assert common.validate_regions(e, ["us-east-1", "us-east-1"], R) == ["us-east-1"]
    assert common.validate_regions(e, [" ", ""], R) == [R]
    with pytest.raises(ConfigError, match="unknown region 'xx-nowhere-1'"):
        common.validate_regions(e, ["xx-nowhere-1"], R)


def test_region_note_only_when_the_shell_differs(tmp_path, monkeypatch):
    s = make_settings(tmp_path)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", s.aws.region)
    assert common.region_note(s) is None
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert "using region us-west-2 from the settings; the environment says eu-west-1" in common.region_note(s)


def test_placement_round_trip_and_broken_files(tmp_path, monkeypatch):
    monkeypatch.delenv("RAYTRAIN_RUNS_DIR", raising=False)  # runs/ beside env.yaml, whatever ran before
    s = make_settings(tmp_path)
    assert common.load_placement(s) is None
    data = dict(region=R, az="us-west-2a", instance_type="g6.12xlarge")
    path = common.save_placement(s, data)
    assert path == tmp_path / "runs" / "tutorial" / "placement.json" and common.load_placement(s) == data
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        common.load_placement(s)
    path.write_text('{"region": "us-west-2"}')
    with pytest.raises(ConfigError, match="lacks 'az'"):
        common.load_placement(s)


def test_wait_until_returns_the_final_state_or_times_out():
    states = iter(["CREATING", "CREATING", "ACTIVE"])
    assert (
        common.wait_until(lambda: next(states), done=lambda st: st == "ACTIVE", desc="x", timeout=5, every=0.01)
        == "ACTIVE"
    )
    with pytest.raises(common.WaitTimeout, match="still CREATING") as e:
        common.wait_until(
            lambda: "CREATING", done=lambda st: False, desc="ng", timeout=0.05, every=0.01, nodegroup="ng"
        )
    assert e.value.state == "CREATING" and e.value.nodegroup == "ng"
