"""``raytrain-tutorial run`` on aws stopping at a failed notebook: what still bills, read from the account, its cost
per hour and the command that stops it; with ``aws.teardown_on_failure`` the teardown runs and nothing is left.

Against the fakes of tests/notebooks/test_aws_notebooks.py: a moto server with the fake eksctl on PATH (02 `up`
creates the cluster, its node groups, the NAT gateway and the bucket there) and the Kubernetes stand-in for 02's
storage check. Notebook 05 then runs through papermill (a real kernel) with no Kubernetes API to reach, and fails.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import boto3
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from raytrain_helpers import cli  # noqa: E402
from raytrain_helpers.cli import run as cli_run  # noqa: E402
from raytrain_helpers.targets import aws as aws_target  # noqa: E402
from raytrain_helpers.targets.aws.eks import state as eks_state  # noqa: E402
from tests.fakes.aws import moto_ext  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402
from tests.fakes.aws.moto_env import moto_server  # noqa: E402
from tests.fakes.k8s_standin import StandIn  # noqa: E402
from tests.helpers import notebook_outputs  # noqa: E402

pytestmark = [pytest.mark.notebooks, pytest.mark.timeout(300)]

R, NAME, RUN = "us-west-2", "raytrain-tutorial", "failrun"
#: 2 x g6.12xlarge, 1 x m7i.xlarge, the EKS control plane (standard support) and one NAT gateway, at plan/cost.py's
#: list prices: 2 x 4.6016 + 0.2016 + 0.10 + 0.045.
PER_HOUR = "9.55"


@pytest.fixture
def cluster_up(tmp_path, monkeypatch):
    """A moto account where 02 `up` made the cluster (storage check in the stand-in); then no Kubernetes API."""
    monkeypatch.delenv("RAYTRAIN_RUNS_DIR", raising=False)
    shutil.copy(REPO / "env.yaml", tmp_path / "env.yaml")
    monkeypatch.setattr(eks_state, "POLL_S", 0.5)
    with moto_server() as srv:
        st = StandIn("healthy", delay_s=0.05).start()
        monkeypatch.setenv("FAKE_EKSCTL_API_KUBECONFIG", st.kubeconfig)
        try:
            s = make_settings(tmp_path, gpu_az="us-west-2b", run_name=RUN)
            assert aws_target.cluster(s, "up", assume_yes=True).ok
        finally:
            st.stop()
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))  # 05 finds no cluster API: it fails
        yield srv, tmp_path


def _run(tmp_path, capsys, *params: str) -> tuple[int, str]:
    argv = ["run", "--only", "05", "--env-file", str(tmp_path / "env.yaml"), "--target", "aws", "--run-name", RUN]
    argv += ["-p", "gpu_az", "us-west-2b", *params]
    code = cli.main(argv)
    return code, capsys.readouterr().out


def _interrupted(*args, **kwargs):
    raise KeyboardInterrupt


def test_a_run_failing_at_05_shows_what_bills_and_the_opt_in_teardown_removes_it(cluster_up, capsys, monkeypatch):
    srv, tmp_path = cluster_up
    code, out = _run(tmp_path, capsys)
    assert code == 1 and "FAILED at 05_train" in out
    block = out[out.index("STILL BILLING") :]
    assert f"STILL BILLING (AWS account 123456789012, us-west-2): about ${PER_HOUR}/h" in block
    for row in (
        r"EKS cluster raytrain-tutorial \(ACTIVE\)\s*\| 1\s*\| 0\.100",
        r"node group gpu-efa \(ACTIVE\)\s*\| 2 x g6\.12xlarge\s*\| 9\.203",
        r"node group system \(ACTIVE\)\s*\| 1 x m7i\.xlarge\s*\| 0\.202",
        r"NAT gateway nat-\w+ \(available\)\s*\| 1\s*\| 0\.045",
        r"S3 bucket raytrain-tutorial-123456789012-us-west-2 \(created by the tutorial\)",
    ):
        assert re.search(row, block), (row, block)
    assert "stop it: raytrain-tutorial down --target aws --yes" in block
    # the failed notebook shows the same below its error (what a learner in JupyterLab sees)
    executed = notebook_outputs(tmp_path / "runs" / RUN / "notebooks" / "05_train.ipynb")
    assert f"about ${PER_HOUR}/h until you stop it" in executed
    assert cli.main(["status", "--env-file", str(tmp_path / "env.yaml"), "--target", "aws"]) == 0
    assert f"about ${PER_HOUR}/h" in capsys.readouterr().out  # `status` shows it any time
    assert boto3.client("eks", region_name=R).list_clusters()["clusters"] == [NAME]  # nothing deleted unasked
    # a run interrupted (Ctrl-C) says the same, and tears nothing down even with the setting
    with monkeypatch.context() as m:
        m.setattr(cli_run, "run_notebooks", _interrupted)
        code, out = _run(tmp_path, capsys, "-p", "teardown_on_failure", "true")
    assert code == 130 and f"about ${PER_HOUR}/h until you stop it" in out and "teardown after" not in out

    code, out = _run(tmp_path, capsys, "-p", "teardown_on_failure", "true")
    assert code == 1 and "teardown after the failure" in out
    assert "teardown: everything is gone" in out
    assert "still billing (AWS account 123456789012, us-west-2): nothing of this tutorial" in out
    assert [" ".join(c["argv"][:2]) for c in srv.eksctl_calls()][-2:] == ["delete nodegroup", "delete cluster"]
    assert boto3.client("eks", region_name=R).list_clusters()["clusters"] == []
    nats = boto3.client("ec2", region_name=R).describe_nat_gateways()["NatGateways"]
    assert [n for n in nats if n["State"] in ("pending", "available")] == []
    assert moto_ext.FAKE.reservations == {} or not any(moto_ext.FAKE.reservations.values())
