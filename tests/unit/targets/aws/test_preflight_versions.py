"""The preflight's Kubernetes version row: ``aws.k8s_version`` against EKS's ``DescribeClusterVersions``.

moto 5.2.1 does not implement the operation (it answers 404 "Not yet implemented"), so these tests stub the real eks
client with botocore's Stubber: the request is checked against botocore's eks service model, and every response
below has the model's shape (``clusterVersions`` of ``clusterVersion``, ``versionStatus`` STANDARD_SUPPORT /
EXTENDED_SUPPORT / UNSUPPORTED, ``endOfStandardSupportDate`` / ``endOfExtendedSupportDate`` timestamps); the Stubber
refuses a response that does not. The dates are made up for the test; the row must read them, never a table.
"""

from __future__ import annotations

import datetime as dt
import importlib
import sys
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from tests.fakes.aws.fixtures import make_settings  # noqa: E402

pf = importlib.import_module("raytrain_helpers.targets.aws.preflight")
TODAY = dt.date(2026, 12, 5)


def utc(y: int, m: int, d: int) -> dt.datetime:
    return dt.datetime(y, m, d, tzinfo=dt.timezone.utc)


def version(v: str, status: str, end_std: dt.datetime, end_ext: dt.datetime) -> dict:
    return {
        "clusterVersion": v,
        "clusterType": "eks",
        "defaultPlatformVersion": "eks.1",
        "defaultVersion": False,
        "releaseDate": end_std - dt.timedelta(days=425),
        "endOfStandardSupportDate": end_std,
        "endOfExtendedSupportDate": end_ext,
        "versionStatus": status,
        "kubernetesPatchVersion": f"{v}.0",
    }


OFFERED = [
    version("1.36", "STANDARD_SUPPORT", utc(2027, 7, 28), utc(2028, 7, 28)),
    version("1.35", "STANDARD_SUPPORT", utc(2026, 12, 20), utc(2027, 12, 20)),
    version("1.33", "EXTENDED_SUPPORT", utc(2026, 7, 29), utc(2027, 7, 29)),
    version("1.28", "UNSUPPORTED", utc(2024, 11, 26), utc(2025, 11, 26)),
]


@pytest.fixture
def eks(monkeypatch):
    """The eks client the row asks for, stubbed; every other client as the preflight makes it."""
    client = boto3.client("eks", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(client)
    real = pf.aws_client.client
    monkeypatch.setattr(
        pf.aws_client, "client", lambda sess, svc, region=None: client if svc == "eks" else real(sess, svc, region)
    )
    with stub:
        yield stub
    stub.assert_no_pending_responses()


def row(tmp_path, eks, k8s_version: str, versions=OFFERED):
    eks.add_response("describe_cluster_versions", {"clusterVersions": versions}, {"includeAll": True})
    return pf.k8s_version_row(make_settings(tmp_path, k8s_version=k8s_version), None, today=TODAY)


def test_a_version_in_standard_support_is_ok_with_its_end_date_from_eks(tmp_path, eks):
    r = row(tmp_path, eks, "1.36")
    assert (r.what, r.found, r.status, r.blocks, r.fix) == (
        "Kubernetes version",
        "1.36: standard support until 2027-07-28",
        "ok",
        False,
        "",
    )


def test_a_version_newer_than_the_offline_calendar_is_read_from_eks(tmp_path, eks):
    """1.36 is not in core.eks_versions.CALENDAR; the preflight knows it from EKS's answer."""
    from raytrain_helpers.core import eks_versions

    assert "1.36" not in eks_versions.CALENDAR
    assert row(tmp_path, eks, "1.36").found.endswith("until 2027-07-28")


def test_close_to_the_end_of_standard_support_names_the_version_to_move_to(tmp_path, eks):
    r = row(tmp_path, eks, "1.35")  # 15 days left on TODAY
    assert r.status == "ok" and not r.blocks
    assert (
        r.fix == 'extended support (a higher price) from 2026-12-20: set `k8s_version: "1.36"` under aws: in '
        "env.yaml (or -p k8s_version 1.36)"
    )


def test_extended_support_is_shown_and_does_not_stop_the_run(tmp_path, eks):
    r = row(tmp_path, eks, "1.33")
    assert (r.found, r.status, r.blocks) == ("1.33: extended support until 2027-07-29", "ok", False)
    assert "extended support price" in r.fix and "-p k8s_version 1.36" in r.fix


def test_an_unsupported_or_unoffered_version_stops_the_billable_steps(tmp_path, eks):
    r = row(tmp_path, eks, "1.28")
    assert (r.found, r.status, r.blocks) == ("1.28: unsupported since 2025-11-26", "TOO OLD", True)
    r = row(tmp_path, eks, "1.34")
    assert (r.found, r.status, r.blocks) == ("1.34: not offered", "MISSING", True)
    assert r.fix.startswith('one of 1.28, 1.33, 1.35, 1.36: set `k8s_version: "1.36"`')


def test_a_version_newer_than_the_stand_in_models_is_refused_before_asking_eks(tmp_path, eks):
    """The tests' stand-in for the cluster's API models Kubernetes 1.36 (its /version): nothing newer is trusted."""
    from raytrain_helpers.core.constants import K8S_MODELLED_VERSION
    from tests.fakes.k8s_standin.server import KUBERNETES_VERSION

    assert KUBERNETES_VERSION.startswith(f"v{K8S_MODELLED_VERSION}.")
    r = pf.k8s_version_row(make_settings(tmp_path, k8s_version="1.37"), None, today=TODAY)
    assert (r.found, r.status, r.blocks) == ("1.37", "TOO NEW", True)
    assert r.fix.startswith('set `k8s_version: "1.36"`')


def test_an_unreadable_answer_is_unknown_with_the_iam_fix(tmp_path, eks):
    eks.add_client_error("describe_cluster_versions", "AccessDeniedException", "not allowed", 403)
    r = pf.k8s_version_row(make_settings(tmp_path, k8s_version="1.35"), None, today=TODAY)
    assert (r.status, r.blocks) == ("unknown", False)
    assert "AccessDeniedException" in r.found and "allow eks:DescribeClusterVersions" in r.fix
