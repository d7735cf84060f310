"""A workshop hand-out that is safe: the shared cluster sized for every attendee and checked against the account's
vCPU quota (moto), attendees kept apart on one host, their state read from the cluster (the Kubernetes stand-in),
one report, and a teardown of only what the hand-out made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from raytrain_helpers.cli import main
from raytrain_helpers.clients import kubernetes as kube
from raytrain_helpers.core.config import load
from raytrain_helpers.plan import cost, workshop
from raytrain_helpers.plan.raycluster import render_raycluster
from tests.fakes.aws.fixtures import mocked_aws  # noqa: F401
from tests.fakes.k8s_standin import standin

REPO = Path(__file__).resolve().parents[3]
ENV = str(REPO / "env.yaml")


def _handout(tmp_path: Path, roster: str, *extra: str) -> int:
    (tmp_path / "roster.csv").write_text(roster, encoding="utf-8")
    (tmp_path / "aws.yaml").write_text("target: aws\n")
    args = ["handout", "--roster", str(tmp_path / "roster.csv"), "--out", str(tmp_path / "out"), "--env-file", ENV]
    return main([*args, "-f", str(tmp_path / "aws.yaml"), *extra])


def _env(path: Path):
    return load(str(path), environ={}, check_installed_ray=False)


def test_the_shared_cluster_is_sized_for_every_attendee(tmp_path, clean_env, capsys):
    assert _handout(tmp_path, "name\nAnn\nBob\nCy\n", "--offline", "--hours", "2") == 0
    out = tmp_path / "out"
    fac = _env(out / "facilitator" / "env.yaml")
    assert (fac.aws.gpu_node_count, fac.aws.system_node_count, fac.aws.shared_cluster) == (6, 3, False)
    atts = [_env(out / n / "env.yaml") for n in ("ann", "bob", "cy")]
    for s in atts:
        assert s.aws.shared_cluster and s.train.job_timeout_s == 2700  # the aws default run's own budget guard
        quota = list(yaml.safe_load_all((out / s.run_name / "namespace.yaml").read_text()))[1]
        assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == str(s.aws.gpu_node_count * s.aws.gpus_per_node)
    # one JupyterHub host: ports and raylet folders of their own, the same for the same row every time
    ports = [p for s in atts for p in (s.local.gcs_port, s.local.dashboard_port)]
    assert len(set(ports)) == 6 and fac.local.gcs_port not in ports
    assert len({s.local.temp_root for s in atts}) == 3 and all(len(s.local.temp_root) <= 40 for s in atts)
    assert atts[1].local == _env(out / "bob" / "env.yaml").local
    # a base that sets no limit (0) gets the hand-out's own budget guard for every attendee
    unlimited = tmp_path / "unlimited"
    unlimited.mkdir()
    (unlimited / "zero.yaml").write_text("train:\n  job_timeout_s: 0\n")
    assert _handout(unlimited, "name\nAnn\n", "--offline", "-f", str(unlimited / "zero.yaml")) == 0
    assert _env(unlimited / "out" / "ann" / "env.yaml").train.job_timeout_s == 7200
    text = (out / "workshop-cost.txt").read_text()
    want = cost.estimate(fac, fac.aws.region).total_per_hour * 2
    assert f"about USD {want:.0f} for 2 h" in text and "assumes" in text
    assert "NOT checked (--offline)" in capsys.readouterr().out


def test_a_quota_below_the_raycluster_is_refused_and_nothing_written(tmp_path, clean_env, capsys):
    assert _handout(tmp_path, "name\nAnn\n", "--offline", "--gpus-per-attendee", "4") == 2
    assert "below what ann's RayCluster asks for" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_accounts_vcpu_quota_is_checked(tmp_path, clean_env, capsys, mocked_aws):  # noqa: F811
    # moto_ext's account: 192 G and VT vCPUs; each attendee needs 2 x g6.12xlarge = 96
    assert _handout(tmp_path, "name\nAnn\nBob\nCy\n") == 2
    err = capsys.readouterr().err
    assert "G and VT vCPU quota" in err and "nothing was written" in err and "request-service-quota-increase" in err
    assert not (tmp_path / "out").exists()
    assert _handout(tmp_path, "name\nAnn\nBob\n") == 0
    assert "G and VT vCPU quota (us-west-2): 192" in capsys.readouterr().out


def test_roster_ports_that_collide_are_refused(tmp_path, clean_env, capsys):
    base = _env(Path(ENV))
    ann = workshop.local_slot(0, base)["gcs_port"]
    assert _handout(tmp_path, f"name,gcs_port\nAnn,\nBob,{ann}\n", "--offline") == 2
    assert "row 3 (Bob)" in capsys.readouterr().err and not (tmp_path / "out" / "ann").exists()


def _apply_handout_namespaces(out: Path) -> None:
    assert main(["handout", "namespaces", str(out)]) == 0


def test_status_reads_the_cluster_and_teardown_removes_only_the_handouts_namespaces(
    tmp_path, clean_env, capsys, monkeypatch
):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert _handout(tmp_path, "name\nAnn\nBob\n", "--offline") == 0
    out = tmp_path / "out"
    with standin("healthy", set_env=True, plugins_installed=True, operator_installed=True, delay_s=0.05) as st:
        _apply_handout_namespaces(out)
        ann = _env(out / "ann" / "env.yaml")
        with kube.using_client(ann) as api:
            kube.apply(api, render_raycluster(ann))
            # bob's namespace exists but was not made by the hand-out: teardown must leave it
            kube.delete(api, "v1", "Namespace", "ray-train-bob")
            kube.apply(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ray-train-bob"}})
        capsys.readouterr()
        assert main(["handout", "status", str(out)]) == 0
        lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ")]
        rows = {ln.split("|")[2].strip(): [c.strip() for c in ln.split("|")] for ln in lines}
        assert "Ray cluster (live)" in rows["name"]
        assert rows["Ann"][8] not in ("-", "absent") and rows["Bob"][8] == "absent"

        assert main(["handout", "teardown", str(out)]) == 1  # bob's namespace is not the hand-out's
        said = capsys.readouterr().out
        assert "ray-train-ann: deleted" in said and "left alone" in said
        assert st.get("v1", "namespaces", "ray-train-ann") is None
        assert st.get("v1", "namespaces", "ray-train-bob") is not None
        assert st.get("v1", "namespaces", "kube-system") is not None and st.objects("apps/v1", "deployments")


def test_one_report_over_every_attendee(tmp_path, clean_env, capsys):
    assert _handout(tmp_path, "name,target\nAnn,local\nBob,local\n", "--offline", "--host", "cpus=8") == 0
    out = tmp_path / "out"
    nb_path = sorted((out / "ann" / "notebooks").glob("01*.ipynb"))[0]
    nb = json.loads(nb_path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    code[0]["execution_count"] = 1
    code[0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ANN-WAS-HERE\n"}]
    nb_path.write_text(json.dumps(nb))
    assert main(["handout", "report", str(out)]) == 0
    html = (out / "workshop-report.html").read_text()
    assert "ANN-WAS-HERE" in html and "Bob" in html and "No notebook run yet." in html
    assert '<script src="http' not in html


@pytest.mark.parametrize("index", [0, 1, 99])
def test_local_slots_are_deterministic_and_short(index):
    base = _env(Path(ENV))
    a, b = workshop.local_slot(index, base), workshop.local_slot(index, base)
    assert a == b and len(str(a["temp_root"])) <= 40
    assert a["gcs_port"] != base.local.gcs_port and a["dashboard_port"] != base.local.dashboard_port


def test_handout_storage_associates_each_attendee_namespace_and_teardown_removes_them(
    tmp_path,
    clean_env,
    capsys,
    monkeypatch,
    mocked_aws,  # noqa: F811
):
    """The facilitator's 02 (moto; Pod Identity from tests/fakes/aws/moto_ext.py), then ``handout storage``
    twice (the second creates nothing), ``handout status``'s storage column and a teardown that deletes the
    attendees' associations and keeps the facilitator's own."""
    import boto3

    from raytrain_helpers.clients.aws import Identity
    from raytrain_helpers.targets.aws.storage import bucket as storage
    from tests.fakes.aws import moto_ext

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    (tmp_path / "aws.yaml").write_text("target: aws\nstorage_per_namespace: true\n")
    args = ["handout", "--roster", str(tmp_path / "roster.csv"), "--out", str(tmp_path / "out"), "--env-file", ENV]
    (tmp_path / "roster.csv").write_text("name\nAnn\nBob\n", encoding="utf-8")
    assert main([*args, "-f", str(tmp_path / "aws.yaml"), "--offline"]) == 0
    out = tmp_path / "out"
    fac = _env(out / "facilitator" / "env.yaml")
    assert fac.aws.storage_per_namespace and _env(out / "ann" / "env.yaml").aws.storage_per_namespace
    eks = boto3.client("eks", region_name=fac.aws.region)
    eks.create_cluster(name=fac.aws.cluster_name, roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={})
    eks.create_addon(clusterName=fac.aws.cluster_name, addonName="eks-pod-identity-agent")
    ident = Identity("123456789012", "arn:aws:iam::123456789012:user/f", fac.aws.region)
    cluster = eks.describe_cluster(name=fac.aws.cluster_name)["cluster"]
    assert storage.ensure(fac, boto3.session.Session(), ident, cluster, assume_yes=True)[1] == []
    capsys.readouterr()
    try:
        assert main(["handout", "storage", str(out)]) == 0
        said = capsys.readouterr().out
        assert said.count("created, then read back") == 2, said
        assert main(["handout", "storage", str(out)]) == 0
        assert capsys.readouterr().out.count("already there (kept)") == 2
        namespaces = {a["namespace"] for a in eks.list_pod_identity_associations(clusterName=fac.aws.cluster_name)[
            "associations"]}  # fmt: skip
        assert namespaces == {"ray-train", "ray-train-ann", "ray-train-bob"}
        with standin("healthy", set_env=True, plugins_installed=True, operator_installed=True, delay_s=0.05):
            _apply_handout_namespaces(out)
            assert main(["handout", "status", str(out)]) == 0
            lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ")]
            rows = {ln.split("|")[2].strip(): [c.strip() for c in ln.split("|")] for ln in lines}
            assert rows["name"][10] == "storage (live)" and rows["Ann"][10].startswith("associated (")
            assert main(["handout", "teardown", str(out)]) == 0
        said = capsys.readouterr().out
        assert said.count("deleted, then read back: absent") == 4, said  # two namespaces, two associations
        left = eks.list_pod_identity_associations(clusterName=fac.aws.cluster_name)["associations"]
        assert [a["namespace"] for a in left] == ["ray-train"]  # the facilitator's own, from its 02
    finally:
        moto_ext.FAKE.reset()


def test_every_attendee_gets_token_auth_and_a_folder_of_their_own(tmp_path, clean_env, capsys):
    """Attendees share the host: each hand-out turns Ray's token authentication on (each attendee's own token is
    made by their first `up`, 0600 in their own 0700 folder), even where the facilitator's base env.yaml has it
    off; a roster column turning it off is refused."""
    (tmp_path / "off.yaml").write_text("local:\n  auth_mode: disabled\n")
    assert _handout(tmp_path, "name\nAnn\nBob\n", "--offline", "-f", str(tmp_path / "off.yaml")) == 0
    atts = [_env(tmp_path / "out" / n / "env.yaml") for n in ("ann", "bob")]
    assert [s.local.auth_mode for s in atts] == ["token", "token"]
    assert all("{uid}" in s.local.temp_root for s in atts), "an attendee's folder must be their own user's"
    assert len({s.local.temp_root_path() for s in atts}) == 2
    (tmp_path / "x").mkdir()
    assert _handout(tmp_path / "x", "name,auth_mode\nAnn,disabled\n", "--offline") == 2
    err = capsys.readouterr().err
    assert "row 2 (Ann)" in err and "token authentication" in err and not (tmp_path / "x" / "out").exists()


def test_handout_namespaces_never_takes_over_a_namespace_and_teardown_deletes_only_what_it_created(
    tmp_path, clean_env, capsys, monkeypatch
):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert _handout(tmp_path, "name\nAnn\nBob\n", "--offline") == 0
    out = tmp_path / "out"
    bob = _env(out / "bob" / "env.yaml")
    # someone else's namespace of bob's name, even carrying the hand-out's labels
    labels = {"app.kubernetes.io/managed-by": "raytrain-tutorial", "raytrain-tutorial/attendee": bob.run_name}
    theirs = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ray-train-bob", "labels": labels}}
    with standin("healthy", set_env=True, plugins_installed=True, operator_installed=True, delay_s=0.05) as st:
        with kube.using_client(bob) as api:
            kube.apply(api, theirs)
        capsys.readouterr()
        assert main(["handout", "namespaces", str(out)]) == 1
        said = capsys.readouterr().out
        assert "ray-train-ann: created" in said and "ray-train-bob exists already" in said, said
        ann_ns = st.get("v1", "namespaces", "ray-train-ann")
        assert ann_ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
        assert st.get("v1", "resourcequotas", "attendee-quota", "ray-train-ann") is not None
        assert st.get("v1", "resourcequotas", "attendee-quota", "ray-train-bob") is None  # nothing applied in it
        assert main(["handout", "namespaces", str(out)]) == 1  # again: ann's is kept, bob's still refused
        assert "ray-train-ann: already created by this hand-out" in capsys.readouterr().out
        assert main(["handout", "teardown", str(out)]) == 1
        said = capsys.readouterr().out
        assert "ray-train-ann: deleted" in said and "ray-train-bob is not the one" in said, said
        assert st.get("v1", "namespaces", "ray-train-ann") is None
        assert st.get("v1", "namespaces", "ray-train-bob") is not None
        roles = [r["metadata"]["name"] for r in st.objects("rbac.authorization.k8s.io/v1", "clusterroles")]
        assert "raytrain-attendee-ann" not in roles
