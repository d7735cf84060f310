"""A workshop's facilitator trusts nothing an attendee wrote: the report of a planted notebook runs nothing and
reads nothing outside the attendee's folder; every action acts on the facilitator's own record of the hand-out,
and an attendee's edited env.yaml or namespace.yaml is refused or ignored; roster rows that would hand out a
system namespace or the shared cluster are refused; and each hand-out's identities (group, ClusterRole, access
entry) are its own, removed by its teardown (the Kubernetes stand-in, EKS through moto and tests/fakes/aws)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import bs4
import yaml

from raytrain_helpers.cli import main
from raytrain_helpers.cli.report import CSP
from tests.fakes.aws.fixtures import mocked_aws  # noqa: F401
from tests.fakes.k8s_standin import standin

REPO = Path(__file__).resolve().parents[3]
ENV = str(REPO / "env.yaml")
PRINCIPAL = "arn:aws:iam::123456789012:role/workshop-ann"


def _handout(tmp_path: Path, roster: str, out: str = "out", *extra: str) -> int:
    (tmp_path / "roster.csv").write_text(roster, encoding="utf-8")
    (tmp_path / "aws.yaml").write_text("target: aws\n")
    args = ["handout", "--roster", str(tmp_path / "roster.csv"), "--out", str(tmp_path / out), "--env-file", ENV]
    return main([*args, "-f", str(tmp_path / "aws.yaml"), "--offline", *extra])


def _plant(nb_path: Path, md: list[str], outputs: list[dict]) -> None:
    nb = json.loads(nb_path.read_text())
    nb["cells"][:0] = [
        {"cell_type": "markdown", "id": f"planted-{i}", "metadata": {}, "source": m} for i, m in enumerate(md)
    ]
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    code[0]["execution_count"] = 1
    code[0]["outputs"] = outputs
    nb_path.write_text(json.dumps(nb))


def test_the_report_of_a_planted_notebook_runs_nothing_and_reads_nothing_outside_the_attendees_folder(
    tmp_path, clean_env, capsys, monkeypatch
):
    assert _handout(tmp_path, "name,target\nAnn,local\nBob,local\n", "out", "--host", "cpus=8") == 0
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)  # the facilitator's working folder
    secrets = {"in-cwd.txt": "SECRET-CWD-1", "outside/creds": "SECRET-LINKED-2", "outside/fac.ipynb": ""}
    (tmp_path / "outside").mkdir()
    for name, text in secrets.items():
        (tmp_path / name).write_text(text)
    fac_nb = json.loads(sorted((out / "ann" / "notebooks").glob("01*.ipynb"))[0].read_text())
    fac_nb["cells"] = [{"cell_type": "markdown", "metadata": {}, "source": "SECRET-NOTEBOOK-3"}]
    (tmp_path / "outside" / "fac.ipynb").write_text(json.dumps(fac_nb))
    os.symlink(tmp_path / "outside" / "creds", out / "ann" / "creds.png")  # a link inside the attendee's folder
    os.symlink(tmp_path / "outside" / "fac.ipynb", out / "ann" / "notebooks" / "09_stolen.ipynb")
    _plant(
        sorted((out / "ann" / "notebooks").glob("01*.ipynb"))[0],
        [
            "![a](in-cwd.txt) ![b](out/ann/creds.png) ![c](../creds.png) <img src='in-cwd.txt'>",
            "<script>window.PWNED_MD=1</script> <img src=x onerror=\"window.PWNED_ATTR=1\">",
            "<a href=\"javascript:1\">j</a>",
            "<iframe srcdoc='<script>1</script>'></iframe><meta http-equiv=refresh content='0;url=http://x'>",
        ],
        [
            {"output_type": "stream", "name": "stdout", "text": "ANN-WAS-HERE\n"},
            {"output_type": "display_data", "metadata": {},
             "data": {"text/html": "<script>window.PWNED_OUT=1</script><b onmouseover='x()'>bold</b>",
                      "application/javascript": "window.PWNED_JS=1", "text/plain": "x"}},
            {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0KGgo=", "text/plain": "p"}},
        ],
    )  # fmt: skip
    assert main(["handout", "report", str(out)]) == 0
    html = (out / "workshop-report.html").read_text()
    assert "ANN-WAS-HERE" in html and "data:image/png;base64,iVBORw0KGgo=" in html  # the work, its own images
    for text in ("SECRET-CWD-1", "SECRET-LINKED-2", "SECRET-NOTEBOOK-3"):
        assert text not in html and base64.b64encode(text.encode()).decode()[:12] not in html, text
    soup = bs4.BeautifulSoup(html, "html.parser")
    assert not soup.find_all(["script", "iframe", "object", "embed", "base", "form"]), "nothing that runs"
    assert not [a for t in soup.find_all(True) for a in t.attrs if a.lower().startswith("on")]
    assert not [t for t in soup.find_all(src=True) if not t["src"].startswith("data:image/")]
    assert "PWNED_JS" not in html and "javascript:" not in html
    metas = soup.head.find_all("meta")
    assert any(m.get("http-equiv") == "Content-Security-Policy" and m.get("content") == CSP for m in metas[:2])
    assert "script-src" not in CSP and "default-src 'none'" in CSP  # no script of any origin


def _aws_own_and_shared(tmp_path: Path) -> Path:
    roster = f"name,cluster_name,principal_arn\nAnn,,{PRINCIPAL}\nCarl,carl-cluster,\n"
    assert _handout(tmp_path, roster) == 0
    return tmp_path / "out"


def test_an_attendees_edited_env_yaml_is_refused_and_never_acted_on(tmp_path, clean_env, capsys, monkeypatch):
    out = _aws_own_and_shared(tmp_path)
    carl = out / "carl" / "env.yaml"
    carl.write_text(carl.read_text().replace("cluster_name: carl-cluster", "cluster_name: production"))
    deleted = []
    from raytrain_helpers.targets import aws

    monkeypatch.setattr(aws, "teardown", lambda s, **kw: deleted.append(s.aws.cluster_name))
    monkeypatch.setattr(aws, "remove_namespace", lambda s, **kw: (True, f"namespace {s.kubernetes.namespace}"))
    monkeypatch.setattr(aws, "attendee_access", lambda s, a, **kw: (True, "access"))
    monkeypatch.setattr(aws, "attendee_storage", lambda s, a, **kw: (True, "storage"))
    capsys.readouterr()
    assert main(["handout", "teardown", str(out), "--yes"]) == 1
    said = capsys.readouterr().out
    assert deleted == [], "the facilitator's teardown followed an attendee's edit"
    assert "NOT DONE: Carl" in said and "cluster_name: 'carl-cluster' -> 'production'" in said, said
    assert "refused, nothing done for Carl" in said and "done: Ann, namespace" in said
    assert main(["handout", "storage", str(out)]) == 1
    assert "NOT DONE: Carl, everything" in capsys.readouterr().out
    # put back: the record's cluster is the one torn down
    carl.write_text(carl.read_text().replace("cluster_name: production", "cluster_name: carl-cluster"))
    monkeypatch.setattr(aws, "teardown", lambda s, **kw: deleted.append(s.aws.cluster_name) or _Done())
    assert main(["handout", "teardown", str(out), "--yes"]) == 0
    assert deleted == ["carl-cluster"]


class _Done:
    ok = True

    def show(self) -> None:
        pass


def test_handout_namespaces_applies_the_record_not_the_attendees_namespace_yaml(
    tmp_path, clean_env, capsys, monkeypatch
):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert _handout(tmp_path, "name\nAnn\n") == 0
    out = tmp_path / "out"
    mine = out / "ann" / "namespace.yaml"
    docs = list(yaml.safe_load_all(mine.read_text()))
    docs[1]["spec"]["hard"]["requests.nvidia.com/gpu"] = "64"
    docs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": "ann-admin"},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                 "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "x"}]})  # fmt: skip
    mine.write_text(yaml.safe_dump_all(docs))
    with standin("healthy", set_env=True, plugins_installed=True, operator_installed=True, delay_s=0.05) as st:
        assert main(["handout", "namespaces", str(out)]) == 0
        quota = st.get("v1", "resourcequotas", "attendee-quota", "ray-train-ann")
        assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] != "64"
        assert st.get("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ann-admin") is None


def test_repeated_handouts_have_identities_of_their_own_and_teardown_removes_its_access_entries(
    tmp_path,
    clean_env,
    capsys,
    monkeypatch,
    mocked_aws,  # noqa: F811
):
    import boto3

    from raytrain_helpers.core.config import load
    from tests.fakes.aws import moto_ext

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    bob = "arn:aws:iam::123456789012:role/workshop-bob"
    roster = f"name,principal_arn\nAnn,{PRINCIPAL}\nBob,{bob}\n"
    assert _handout(tmp_path, roster, "week1") == 0
    assert _handout(tmp_path, roster, "week2") == 0

    def names(week: str) -> tuple[str, str, str]:
        docs = list(yaml.safe_load_all((tmp_path / week / "ann" / "namespace.yaml").read_text()))
        entry = json.loads((tmp_path / week / "ann" / "access-entry.json").read_text())
        binding = next(d for d in docs if d["kind"] == "RoleBinding")
        role = next(d for d in docs if d["kind"] == "ClusterRole")
        return binding["subjects"][0]["name"], role["metadata"]["name"], entry["kubernetesGroups"][0]

    w1, w2 = names("week1"), names("week2")
    assert w1[0] == w1[2] and w2[0] == w2[2], "the entry's group is the one the RoleBinding binds"
    assert w1[0] != w2[0] and w1[1] != w2[1], "last week's group or ClusterRole is this week's"
    fac = load(str(tmp_path / "week1" / "facilitator" / "env.yaml"), environ={}, check_installed_ray=False)
    eks = boto3.client("eks", region_name=fac.aws.region)
    eks.create_cluster(name=fac.aws.cluster_name, roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={})
    # someone's own entry for bob's role: not the hand-out's, never replaced or deleted
    eks.create_access_entry(clusterName=fac.aws.cluster_name, principalArn=bob, kubernetesGroups=["theirs"])
    capsys.readouterr()
    try:
        with standin("healthy", set_env=True, plugins_installed=True, operator_installed=True, delay_s=0.05) as st:
            assert main(["handout", "namespaces", str(tmp_path / "week1")]) == 1  # bob's entry is not ours
            said = capsys.readouterr().out
            assert f"access entry {PRINCIPAL}: created, then read back" in said
            assert f"access entry {bob} exists and is not this hand-out's" in said, said
            live = eks.describe_access_entry(clusterName=fac.aws.cluster_name, principalArn=PRINCIPAL)["accessEntry"]
            assert live["kubernetesGroups"] == [w1[2]]
            assert main(["handout", "teardown", str(tmp_path / "week1")]) == 1
            said = capsys.readouterr().out
            assert f"access entry {PRINCIPAL}: deleted, then read back: absent" in said, said
            left = eks.list_access_entries(clusterName=fac.aws.cluster_name)["accessEntries"]
            assert left == [bob]
            roles = [r["metadata"]["name"] for r in st.objects("rbac.authorization.k8s.io/v1", "clusterroles")]
            assert w1[1] not in roles
            # next week: ann gets this week's group; last week's is gone
            assert main(["handout", "namespaces", str(tmp_path / "week2")]) == 1
            live = eks.describe_access_entry(clusterName=fac.aws.cluster_name, principalArn=PRINCIPAL)["accessEntry"]
            assert live["kubernetesGroups"] == [w2[2]]
            assert main(["handout", "teardown", str(tmp_path / "week1")]) == 1  # last week's teardown, again
            assert "not this hand-out's" in capsys.readouterr().out
            assert eks.describe_access_entry(clusterName=fac.aws.cluster_name, principalArn=PRINCIPAL)
            # a hand-out whose namespaces exist is not written over: its record is what its teardown acts on
            assert _handout(tmp_path, roster, "week2", "--force") == 2
            assert "handout teardown" in capsys.readouterr().err
            assert main(["handout", "teardown", str(tmp_path / "week2")]) == 1  # bob's entry is someone else's
            assert _handout(tmp_path, roster, "week2", "--force") == 0
    finally:
        moto_ext.FAKE.reset()
