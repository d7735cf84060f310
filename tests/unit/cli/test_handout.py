"""``raytrain-tutorial handout``: attendee folders from a roster, validated first, and their progress."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from raytrain_helpers.cli import main
from raytrain_helpers.cli.handout import identifier
from raytrain_helpers.core.config import load

REPO = Path(__file__).resolve().parents[3]
ENV = str(REPO / "env.yaml")


def _roster(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "roster.csv"
    p.write_text(text, encoding="utf-8")
    return p


#: The JupyterHub host of these tests' local rooms (this machine may have 2 cores: the host plan is tested apart).
HOST = "cpus=64,memory_gib=256,disk_gib=1000"


def _handout(roster: Path, out: Path, *extra: str) -> int:
    return main(["handout", "--roster", str(roster), "--out", str(out), "--env-file", ENV, "--host", HOST, *extra])


@pytest.mark.parametrize(
    "name, ident",
    [("José Núñez", "jose-nunez"), ("  Ann  O'Lee ", "ann-o-lee"), ("李", ""), ("A" * 50, "a" * 30), ("x--y", "x-y")],
)
def test_identifier_is_a_dns_label(name, ident):
    assert identifier(name) == ident


def test_handout_writes_one_validated_folder_per_attendee(tmp_path, clean_env):
    roster = _roster(tmp_path, "name,steps,cluster_name\nJosé Núñez,12,\nAnn Lee,,ann-cluster\n")
    out = tmp_path / "out"
    (tmp_path / "aws.yaml").write_text("target: aws\n")  # a shared EKS cluster: namespaces
    assert _handout(roster, out, "-f", str(tmp_path / "aws.yaml"), "--offline") == 0

    jose, ann = out / "jose-nunez", out / "ann-lee"
    s = load(jose / "env.yaml", environ={}, check_installed_ray=False)
    assert (s.run_name, s.train.steps) == ("jose-nunez", 12)
    assert s.kubernetes.namespace.endswith("-jose-nunez")
    assert s.kubernetes.ray_cluster_name.endswith("-jose-nunez")
    assert load(ann / "env.yaml", environ={}, check_installed_ray=False).aws.cluster_name == "ann-cluster"

    notebooks = sorted(p.name for p in (jose / "notebooks").glob("*.ipynb"))
    assert notebooks == sorted(p.name for p in (REPO / "notebooks").glob("[0-9]*.ipynb"))
    nb = json.loads((jose / "notebooks" / notebooks[0]).read_text())
    injected = [c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert injected and 'run_name = "jose-nunez"' in "".join(injected[0]["source"])
    assert not any(c.get("execution_count") for c in nb["cells"] if c["cell_type"] == "code"), "prepared, not run"
    assert not any(c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")

    # a shared-cluster attendee gets a namespace with a GPU quota; an own-cluster attendee does not
    docs = list(yaml.safe_load_all((jose / "namespace.yaml").read_text()))
    admission = ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"] * 3  # before the Role: no gap
    kinds = ["Namespace", "ResourceQuota", "LimitRange", *admission, "Role", "RoleBinding", "ClusterRole"]
    assert [d["kind"] for d in docs] == [*kinds, "ClusterRoleBinding"]
    # the quota holds the attendee's whole RayCluster: gpu_node_count worker pods x gpus_per_node GPUs each
    hard = docs[1]["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == str(s.aws.gpu_node_count * s.aws.gpus_per_node)
    assert {"requests.cpu", "limits.cpu", "requests.memory", "limits.memory"} <= set(hard)
    assert not (ann / "namespace.yaml").exists()
    assert len(list(yaml.safe_load_all((out / "shared-cluster.yaml").read_text()))) == len(kinds) + 1
    assert not [p for p in out.iterdir() if p.name.startswith(".handout-")], "staging folder left behind"


@pytest.mark.parametrize(
    "text, words",
    [
        ("name\nAnn Lee\nann lee\n", ["row 3", "row 2", "same as"]),
        ("name,steps\nAnn,abc\nBob,3\n", ["row 2", "steps"]),
        ("name,region\nAnn,\n,us-east-1\n", ["row 3", "name is empty"]),
        ("name,stepz\nAnn,3\n", ["stepz", "not a setting"]),
        ("region\nus-east-1\n", ["no 'name' column"]),
        ("name\n", ["no attendees"]),
        ("name,namespace\nAnn,Bad_NS\n", ["row 2", "namespace"]),
        # a system namespace, the operator's or the base's own: the hand-out would own, then delete, it
        ("name,namespace\nAnn,kube-system\n", ["row 2", "'kube-system' is a system namespace"]),
        ("name,namespace\nAnn,default\n", ["row 2", "'default' is a system namespace"]),
        ("name,namespace\nAnn,kube-anything\n", ["row 2", "system namespace"]),
        ("name,namespace\nAnn,kuberay-system\n", ["row 2", "system namespace"]),
        ("name,namespace\nAnn,ray-train\n", ["row 2", "the base settings' own namespace"]),
        # a cluster of the attendee's own is still created and deleted with its namespace
        ("name,cluster_name,namespace\nAnn,ann-c,kube-system\n", ["row 2", "'kube-system' is a system namespace"]),
        ("name,cluster_name,namespace\nAnn,ann-c,ray-train\n", ["row 2", "the base settings' own namespace"]),
        # the shared cluster as an attendee's own: their 08 or teardown --yes would delete it
        ("name,cluster_name\nAnn,raytrain-tutorial\n", ["row 2", "is the shared cluster"]),
        # one identity bound in two namespaces
        (
            "name,principal_arn\nAnn,arn:aws:iam::123456789012:role/a\nBob,arn:aws:iam::123456789012:role/a\n",
            ["row 3 (Bob)", "is also row 2's"],
        ),
        ("name,principal_arn\nAnn,arn:aws:iam::12:role/x\n", ["row 2", "principal_arn", "not an IAM role"]),
        # an STS session cannot have an access entry (EKS CreateAccessEntry)
        ("name,principal_arn\nAnn,arn:aws:sts::123456789012:assumed-role/r/s\n", ["row 2", "not an IAM role"]),
    ],
)
def test_bad_rosters_are_refused_with_the_row_and_nothing_is_written(tmp_path, clean_env, capsys, text, words):
    out = tmp_path / "out"
    assert _handout(_roster(tmp_path, text), out) == 2
    err = capsys.readouterr().err
    for w in words:
        assert w in err, err
    assert not out.exists(), "nothing may be written when a row is bad"


def test_existing_attendee_folder_needs_force(tmp_path, clean_env, capsys):
    roster = _roster(tmp_path, "name\nAnn\n")
    out = tmp_path / "out"
    assert _handout(roster, out) == 0
    mine = out / "ann" / "notes.txt"
    mine.write_text("my notes")
    assert _handout(roster, out) == 2
    assert "--force" in capsys.readouterr().err and mine.read_text() == "my notes"
    assert _handout(roster, out, "--force") == 0
    assert not mine.exists()


def test_status_reads_each_attendees_progress(tmp_path, clean_env, capsys):
    out = tmp_path / "out"
    assert _handout(_roster(tmp_path, "name\nAnn\nBob\n"), out) == 0
    capsys.readouterr()
    nb_path = sorted((out / "ann" / "notebooks").glob("01*.ipynb"))[0]
    nb = json.loads(nb_path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    code[0]["execution_count"] = 1
    code[-1]["outputs"] = [{"output_type": "error", "ename": "X", "evalue": "", "traceback": []}]
    nb_path.write_text(json.dumps(nb))
    run = out / "ann" / "runs" / "ann"
    run.mkdir(parents=True)
    (run / "job.json").write_text(json.dumps({"status": "SUCCEEDED", "submission_id": "raysubmit_1"}))
    (run / "verify.json").write_text(json.dumps({"verdict": "failed", "failed": ["loss finite"], "rows": []}))

    assert main(["handout", "status", str(out)]) == 0
    lines = {ln.split("|")[2].strip(): ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ")}
    ann = [c.strip() for c in lines["Ann"].split("|")[3:8]]
    assert ann[:2] == ["01", "01: X:"] and ann[2:4] == ["SUCCEEDED (raysubmit_1)", "failed: loss finite"], ann
    assert ann[4].endswith("s ago")
    assert [c.strip() for c in lines["Bob"].split("|")[3:8]] == ["-", "-", "-", "-", "-"]


def test_status_of_a_folder_that_is_no_handout(tmp_path, capsys):
    assert main(["handout", "status", str(tmp_path)]) == 2
    assert "not a hand-out folder" in capsys.readouterr().err


def test_an_attendee_with_a_principal_gets_an_access_entry_to_their_group(tmp_path, clean_env):
    """The CreateAccessEntry request, checked against botocore's own model of the EKS API."""
    import botocore.session
    from botocore.validate import ParamValidator

    arn = "arn:aws:iam::123456789012:role/workshop-ann"
    out = tmp_path / "out"
    (tmp_path / "aws.yaml").write_text("target: aws\n")
    roster = _roster(tmp_path, f"name,principal_arn\nAnn,{arn}\nBob,\n")
    assert _handout(roster, out, "-f", str(tmp_path / "aws.yaml"), "--offline") == 0
    entry = json.loads((out / "ann" / "access-entry.json").read_text())
    model = botocore.session.get_session().get_service_model("eks").operation_model("CreateAccessEntry")
    report = ParamValidator().validate(entry, model.input_shape)
    assert not report.has_errors(), report.generate_report()
    assert entry["principalArn"] == arn and entry["type"] == "STANDARD"
    (group,) = entry["kubernetesGroups"]
    assert not group.startswith("system:")
    docs = list(yaml.safe_load_all((out / "ann" / "namespace.yaml").read_text()))
    bindings = [d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert all(b["subjects"] == [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": group}]
               for b in bindings)  # fmt: skip
    assert not (out / "bob" / "access-entry.json").exists()
