"""The notebooks on target=aws, executed headless with papermill against the fakes, in the tutorial's order.

* AWS is a moto server (tests/fakes/aws/moto_env.py) with the fake ``eksctl`` on PATH: 01 ranks the AZs and
  saves the placement, 02 renders the ClusterConfig (plan) then creates the cluster through eksctl (up).
* Kubernetes is the API stand-in (tests/fakes/k8s_standin), named like the context eksctl writes: 03 installs the
  device plugins and waits for allocatable GPUs/EFA, 04 the KubeRay operator and the RayCluster; three
  broken clusters make 03/04 fail with their diagnosis.
* 05 submits the real FSDP job with ``JobSubmissionClient`` through ``kuberay.job_server``'s port-forward;
  the stand-in relays the head pod's 8265 to a REAL local Ray cluster (the session's shared one), so
  the job (tiny preset, 2 steps) really trains, on CPU with gloo.
* 06 verifies: infrastructure rows from the stand-in (allocatable, ``fi_info -p efa`` by exec), the job's
  record, and the NCCL audit of worker logs read from the worker pods by exec
  (``targets.aws.jobs.logs.collect_pod_logs``).
  A CPU job writes no NCCL lines, so the pods serve the synthetic 2 x 4 EFA logs under this run's marker.
* 08 deletes everything in reverse order, each step verified by listing (stand-in objects, moto resources).

Every output notebook is checked for the fake AWS credentials. One moto server and one stand-in serve the whole
module, with the session's local Ray cluster behind the head pod; the tests depend on each other's order, as
the notebooks do.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import boto3
import papermill as pm
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
NB = REPO / "notebooks"
FIX = REPO / "tests" / "fixtures" / "nccl"
sys.path.insert(0, str(REPO / "tests"))

from raytrain_helpers.steps import display  # noqa: E402
from raytrain_helpers.targets.aws.jobs import efa_tools  # noqa: E402
from tests.conftest import TEST_LOCAL  # noqa: E402
from tests.fakes.aws.moto_env import FAKE_ACCESS_KEY, FAKE_SECRET_KEY, FAKE_SESSION_TOKEN, moto_server  # noqa: E402
from tests.fakes.k8s_standin import ray_worker_logs, standin  # noqa: E402
from tests.helpers import notebook_outputs  # noqa: E402

pytestmark = [pytest.mark.notebooks, pytest.mark.integration, pytest.mark.timeout(300)]

SECRETS = (FAKE_ACCESS_KEY, FAKE_SECRET_KEY, FAKE_SESSION_TOKEN)
RUN = "awsnb"
CLUSTER, REGION = "raytrain-tutorial", "us-west-2"
#: The local Ray cluster behind the head pod's 8265: the test session's shared cluster (tests/conftest.py).
LOCAL = TEST_LOCAL
#: Named like the context `eksctl utils write-kubeconfig` writes, so the teardown finds *this* cluster's context.
CONTEXT = f"{CLUSTER}.{REGION}.eksctl.io"


# --------------------------------------------------------------------------------------------
# Running a notebook
# --------------------------------------------------------------------------------------------


def _no_secrets(text: str, where: str) -> None:
    for s in SECRETS:
        assert s not in text, f"a fake AWS credential appears in {where}"


def run_nb(name: str, work: Path, *, fails: bool = False, **params) -> str:
    """Execute notebooks/<name>.ipynb headless on target=aws; return its outputs' text. ``fails``: it must
    raise (papermill's error), and the text then holds the cells' outputs up to the failing one."""
    out = work / f"{name}-{len(list(work.glob(name + '-*.ipynb')))}.ipynb"
    params = dict(target="aws", run_name=RUN, env_file=str(work / "env.yaml"), **params)
    err = None
    try:
        pm.execute_notebook(
            str(NB / f"{name}.ipynb"),
            str(out),
            parameters=params,
            cwd=str(NB),
            kernel_name="python3",
            progress_bar=False,
        )
    except pm.PapermillExecutionError as e:
        err = e
    text = notebook_outputs(out)
    _no_secrets(text, out.name)
    if fails:
        assert err is not None, f"{name} should have failed:\n{text[-3000:]}"
        _no_secrets(str(err), f"{name}'s error")
        return text + f"\n{err.ename}: {err.evalue}"
    assert err is None, f"{name} failed: {err}\n{text[-4000:]}"
    return text


# --------------------------------------------------------------------------------------------
# Module fixtures: one moto server, one stand-in, one local Ray cluster
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The repository's env.yaml, except that the aws target's defaults are the local target's: the stand-in cluster
    has CPUs and no network, so it trains the toy language on the tiny model, not the real task (a learner's edit of
    `target_defaults`, the same mechanism; test_target_defaults.py checks the real task's values)."""
    d = tmp_path_factory.mktemp("awsnb")
    doc = yaml.safe_load((REPO / "env.yaml").read_text())
    doc["target_defaults"]["aws"] = doc["target_defaults"]["local"]
    (d / "env.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return d


@pytest.fixture(scope="module")
def env(work, local_settings):
    """os.environ for the kernels: the repository first on PYTHONPATH, runs/ in the work dir, no RAYTRAIN_*.
    ``local_settings`` first: the session's RAYTRAIN_RUNS_DIR is set before this module changes it, so that the
    undo at its end gives it back to the tests that follow on this worker (not an environment without it)."""
    mp = pytest.MonkeyPatch()
    for k in list(os.environ):
        if k.startswith("RAYTRAIN_") or k in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
            mp.delenv(k)
    mp.setenv("RAYTRAIN_RUNS_DIR", str(work / "runs"))
    mp.setenv("PYTHONPATH", os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    yield mp
    mp.undo()


@pytest.fixture(scope="module")
def aws(env):
    """The moto server (+ fake eksctl on PATH, fake credentials in os.environ) for the module."""
    with moto_server() as srv:
        yield srv


def _local_ray_token() -> str | None:
    """The token the local test cluster runs with (``local_cluster`` puts its file in this process's environment)."""
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    return Path(path).read_text().strip() if path and Path(path).is_file() else os.environ.get("RAY_AUTH_TOKEN")


@pytest.fixture(scope="module")
def k8s_api(aws):
    """The healthy stand-in, relaying the head's 8265 to the local Ray cluster's dashboard; as 02's eksctl leaves
    the cluster: its own EFA device plugin in kube-system, GPU nodes without taints."""
    opts = dict(
        context=CONTEXT,
        dashboard_upstream=f"127.0.0.1:{LOCAL['dashboard_port']}",
        ray_token=_local_ray_token,  # the "pods" are the local raylets: their token is the RayCluster's
        delay_s=0.2,
        eksctl_efa_plugin=True,
        gpu_taints=False,
    )
    with standin("healthy", **opts) as st:
        yield st


@pytest.fixture
def kubeconfig(k8s_api, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", k8s_api.kubeconfig)
    return k8s_api


def _eks():
    return boto3.client("eks", region_name=REGION)


# --------------------------------------------------------------------------------------------
# 01, 02 against moto
# --------------------------------------------------------------------------------------------


def test_01_capacity_ranks_azs_and_recommends_a_placement(aws, work):
    text = run_nb("01_capacity", work)
    assert "AZs offering g6.12xlarge x 2, best first" in text
    assert "| 1  | us-west-2      | us-west-2a (usw2-az2)" in text  # the ranked table, best first
    assert "placement: us-west-2 / us-west-2a (usw2-az2) [ranked]" in text
    assert "capacity: OK" in text and "FSDP memory plan" in text
    assert "Capacity Blocks for ML (2 x g6.12xlarge for 24 h in us-west-2): none offered now" in text
    assert (work / "runs" / RUN / "placement.json").is_file()


def test_02_plan_renders_the_cluster_config_and_creates_nothing(aws, work):
    text = run_nb("02_cluster", work)  # on aws the default action without assume_yes is plan
    assert "cluster step 'plan'" in text and "kind: ClusterConfig" in text
    assert "name: raytrain-tutorial" in text and "efaEnabled: true" in text
    assert "actions planned (nothing was created)" in text
    assert aws.eksctl_calls() == [] and _eks().list_clusters()["clusters"] == []


def test_02_up_creates_the_cluster_through_eksctl(aws, work, k8s_api, monkeypatch):
    # the kubeconfig eksctl writes reaches the stand-in: 02's storage check pod runs there before the GPU node group
    monkeypatch.setenv("FAKE_EKSCTL_API_KUBECONFIG", k8s_api.kubeconfig)
    text = run_nb("02_cluster", work, assume_yes=True)
    assert "confirmed by assume_yes=True" in text and "cluster: OK" in text
    ops = [" ".join(c["argv"][:2]) for c in aws.eksctl_calls()]
    assert ops == ["create cluster", "create nodegroup"]
    assert "storage check from pod raytrain-storage-check (the pods' ServiceAccount): create_dir" in text
    assert not [p for p in k8s_api.objects("v1", "pods") if p["metadata"]["name"] == "raytrain-storage-check"]
    assert _eks().describe_cluster(name=CLUSTER)["cluster"]["status"] == "ACTIVE"
    ng = _eks().describe_nodegroup(clusterName=CLUSTER, nodegroupName="gpu-efa")["nodegroup"]
    assert ng["status"] == "ACTIVE" and ng["scalingConfig"]["desiredSize"] == 2
    _no_secrets(
        "\n".join(p.read_text(errors="replace") for p in (work / "runs").rglob("*") if p.is_file()),
        "runs/ (eksctl logs and configs)",
    )


# --------------------------------------------------------------------------------------------
# 03, 04 against the Kubernetes stand-in
# --------------------------------------------------------------------------------------------


def test_03_plugins_make_gpus_and_efa_allocatable(kubeconfig, work):
    text = run_nb("03_plugins", work)
    assert "device plugins (aws, up): OK - every GPU node advertises its GPUs and EFA" in text
    assert text.count("| g6.12xlarge   | us-west-2a | 4/4            | 1                     | ok") == 2
    # eksctl's own EFA plugin (v0.5.4) was replaced: one EFA plugin, the tutorial's, serves each GPU node
    assert "replaced eksctl's EFA device plugin kube-system/aws-efa-k8s-device-plugin (image v0.5.4" in text
    assert text.count("| raytrain-aws-efa-k8s-device-plugin (tutorial, v0.5.20)") == 2  # the "served by" cells
    assert {n["metadata"]["name"] for n in kubeconfig.objects("apps/v1", "daemonsets", "kube-system")} == {
        "nvidia-device-plugin",
        "raytrain-aws-efa-k8s-device-plugin",
    }


def test_04_kuberay_operator_and_raycluster_ready(kubeconfig, local_cluster, work):  # 04 waits on the Jobs API
    text = run_nb("04_kuberay", work)
    assert "KubeRay (aws, up): OK - RayCluster ray-train/raytrain ready" in text
    pods = kubeconfig.objects("v1", "pods", "ray-train")
    roles = sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods)
    assert roles == ["head", "worker", "worker"]
    assert all(p["status"]["phase"] == "Running" for p in pods)


# --------------------------------------------------------------------------------------------
# 05, 06: the real job through the port-forward, then verification
# --------------------------------------------------------------------------------------------


def test_05_submits_the_fsdp_job_through_the_port_forward(kubeconfig, local_cluster, work):
    # On EKS storage_path must be s3://... (every worker pod must reach it; jobs.storage_path refuses an empty
    # one on aws). Here the "pods" are local raylets, so a local directory stands in for the bucket.
    # The "pods" are the session's CPU raylets: kernels none, or the job's runtime_env would pip-install
    # liger-kernel (and triton) for GPUs there are none of (what the aws job asks pip for is a unit test of
    # train.job_pip). The aws entrypoint is the image's `python`, which the DLC has on its PATH; these raylets were
    # started with no `python` on theirs, so the job's environment puts this interpreter's folder first.
    image_path = {"PATH": f"{Path(sys.executable).parent}:${{PATH}}"}
    text = run_nb("05_train", work, steps=2, storage_path=str(work / "storage"), kernels="none", env=image_path)
    pf = [line for line in text.splitlines() if line.startswith("submitted raytrain-awsnb-")]
    assert pf, text[-2000:]
    port = int(pf[0].rsplit(":", 1)[1])
    assert port != LOCAL["dashboard_port"]  # a port-forward, not the dashboard itself
    head = next(
        p["metadata"]["name"]
        for p in kubeconfig.objects("v1", "pods", "ray-train")
        if p["metadata"]["labels"]["ray.io/node-type"] == "head"
    )
    assert (head, 8265) in kubeconfig.cluster.portforwards
    assert "SUCCEEDED" in text and "steps 0->2 of 2" in text and "world size 2" in text
    assert "[train] SUCCESS rank=0/2" in text and "[train] SUCCESS rank=1/2" in text
    assert "use_gpu=False, backend=gloo" in text


def _serve_nccl_logs(st, work, healthy: str, other_run: str) -> str:
    """The worker pods serve this run's NCCL logs (``healthy``) and an earlier run's (``other_run``)."""
    import json

    # 05 recorded its job beside the work folder's env.yaml, or under RAYTRAIN_RUNS_DIR when the session set it
    records = [work / "runs" / RUN / "job.json", Path(os.environ.get("RAYTRAIN_RUNS_DIR", work)) / RUN / "job.json"]
    marker = json.loads(next(p for p in records if p.is_file()).read_text())["config"]["marker"]
    nodes = st.gpu_nodes()
    files = ray_worker_logs((FIX / healthy).read_text(), marker, nodes)
    older = ray_worker_logs((FIX / other_run).read_text(), "0ldrun000000", nodes, job_id="01000000")
    for n in nodes:
        files[n].update(older[n])
    st.serve_files(files)
    return marker


def _criteria(text: str) -> dict[str, tuple[str, str]]:
    """The verification table's rows: criterion -> (result, evidence), wrapped rows joined back."""
    return display.criteria_rows(text)


def test_06_verify_reads_the_infrastructure_and_the_pods_logs(kubeconfig, local_cluster, work):
    _serve_nccl_logs(kubeconfig, work, "synthetic-efa-2x4-healthy.log", "synthetic-efa-2x4-sockets-provider.log")
    n_exec = len(kubeconfig.cluster.exec_log)
    # 05 ran 2 CPU ranks through the stand-in while the pods serve the 8-rank EFA logs of a GPU run: 06 must
    # notice that the audited logs are not this job's, and every other row passes
    text = run_nb("06_verify", work, fails=True)
    rows = _criteria(text)
    audit_world = rows.pop("NCCL audit covers the job's 2 ranks")
    expected = ("FAIL", "world communicator in the audited NCCL logs: 8 ranks; the job: 2 ranks")
    assert audit_world == expected, audit_world
    # 05 ran 2 steps of the tiny model: far too few to learn the toy task, and 06 says so (the default 80 do)
    completes = rows.pop("trained model completes held-out prompts (>= 90% exactly)")
    assert completes[0] == "FAIL" and "needs >= 90%" in completes[1], completes
    assert rows["GPUs allocatable on every GPU node"] == ("PASS", "2 GPU node(s) advertise nvidia.com/gpu=4")
    assert rows["EFA allocatable on every GPU node"][0] == "PASS"
    assert rows["EFA provider with an RDM endpoint (fi_info -p efa)"] == (
        "PASS",
        "2/2 worker pod(s): provider efa, FI_EP_RDM (rdmap0s0-rdm)",
    )
    assert rows["head Ready + workers Running"] == ("PASS", "head Ready, workers Running 2/2")
    assert rows["job SUCCEEDED"] == ("PASS", "SUCCEEDED (cluster now says SUCCEEDED)")  # asked through the forward
    assert rows["NCCL transport as expected (efa) for every rank pair"][1].startswith("pass: 8 ranks on 2 host(s)")
    # 05 wrote its checkpoints to this machine's disk (the stand-in has no S3), so that row does not apply here
    assert rows.pop("checkpoint in storage")[0] == "n/a", rows
    assert {r for r, _ in rows.values()} == {"PASS"} and len(rows) >= 13, rows
    calls = kubeconfig.cluster.exec_log[n_exec:]
    workers = {p for p, _ in calls}
    assert len(workers) == 2 and all("-worker-" in p for p in workers)
    assert sum(1 for _, argv in calls if argv == efa_tools.fi_info_command()) == 2
    assert sum(1 for _, argv in calls if argv[:1] == ["cat"]) == 16  # 8 ranks x (.out + .err), not the old run


# --------------------------------------------------------------------------------------------
# 08: everything gone, in reverse order, verified by listing
# --------------------------------------------------------------------------------------------


def test_08_teardown_removes_everything_in_reverse_order(kubeconfig, aws, work):
    n_calls = len(aws.eksctl_calls())
    n_requests = len(kubeconfig.cluster.requests)  # 03 deleted eksctl's EFA DaemonSet: only 08's deletes count here
    text = run_nb("08_teardown", work, assume_yes=True)
    st = kubeconfig
    assert st.cluster.kind_info("ray.io/v1", "rayclusters") is None or not st.objects("ray.io/v1", "rayclusters")
    assert st.objects("v1", "pods", "ray-train") == []
    assert [d for d in st.objects("apps/v1", "deployments") if "kuberay" in d["metadata"]["name"]] == []
    assert st.objects("apps/v1", "daemonsets", "kube-system") == []
    deletes = [p for m, p in st.cluster.requests[n_requests:] if m == "DELETE"]
    first = {
        k: next(i for i, p in enumerate(deletes) if k in p) for k in ("/rayclusters/", "/deployments/", "/daemonsets/")
    }
    assert first["/rayclusters/"] < first["/deployments/"] < first["/daemonsets/"]
    ops = [" ".join(c["argv"][:2]) for c in aws.eksctl_calls()[n_calls:]]
    assert ops == ["delete nodegroup", "delete cluster"]
    assert _eks().list_clusters()["clusters"] == []
    assert "left in the account: nothing" in text and "teardown: everything is gone" in text
    table = [
        [c.strip() for c in ln.strip().strip("|").split("|")]
        for ln in text.splitlines()
        if ln.startswith("| ") and ("| gone " in ln or "| LEFT " in ln)
    ]
    assert [(what.split(" (")[0].split(",")[0], state) for what, state, _ in table] == [
        ("RayCluster ray-train/raytrain and its pods", "gone"),
        ("KubeRay operator", "gone"),
        ("device plugins", "gone"),
        ("storage role raytrain-tutorial-ray-train-raytrain-s3 and its pod identity association", "gone"),
        ("S3 checkpoint bucket raytrain-tutorial-123456789012-us-west-2", "gone"),
        ("GPU node group 'gpu-efa'", "gone"),
        ("EKS cluster raytrain-tutorial", "gone"),
    ]
