"""Every rendered manifest against the real schemas, across a matrix of env.yaml values.

* core kinds (DaemonSet, Deployment, RBAC, Namespace...) with kubernetes-validate, strict, at the newest
  Kubernetes minor it ships, and at the cluster's K8S_VERSION;
* RayCluster / RayJob with jsonschema against the openAPIV3Schema of the KubeRay v1.7.0 CRDs (KUBERAY_VERSION) in
  ``schemas/kuberay/`` (made strict: unknown fields are errors, as ``kubectl --validate=strict``);
  their pod templates also as core ``PodTemplate`` objects;
* :func:`plan.raycluster.check_raycluster` (the structural check the aws step runs before applying) passes for
  every rendered cluster and fails for the broken ones the schema cannot see;
* :func:`plan.manifests.render_all`: every object, one per file, in apply order.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from raytrain_helpers.core import config
from raytrain_helpers.plan import manifests, probes, raycluster
from raytrain_helpers.plan.iam import render_service_account
from raytrain_helpers.plan.kube_objects import quantity
from tests.helpers import aws_settings
from tests.schemas import kuberay_crds

REPO = Path(__file__).resolve().parents[3]


def cores(q) -> float:
    return quantity(q)


def gib(q) -> float:
    return quantity(q) / 2**30


settings = aws_settings


# --------------------------------------------------------------------------------------------
# Schemas
# --------------------------------------------------------------------------------------------


def _strict(schema):
    """Unknown fields become errors where the CRD does not preserve them."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            out.get("type") == "object"
            and "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(x) for x in schema]
    return schema


@functools.cache
def crd_validator(kind: str, kuberay_version: str = config.VersionSettings().kuberay_version):
    d = kuberay_crds(kuberay_version)
    plural = {"RayCluster": "rayclusters", "RayJob": "rayjobs"}[kind]
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load((d / f"ray.io_{plural}.yaml").read_text(), Loader=loader)
    (ver,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = _strict(ver["schema"]["openAPIV3Schema"])
    return jsonschema.Draft7Validator(schema)


def crd_errors(obj) -> list[str]:
    v = crd_validator(obj["kind"])
    return [f"{'.'.join(map(str, e.path))}: {e.message}" for e in v.iter_errors(obj)]


K8S_LATEST = kubernetes_validate.utils.latest_version()


def core_errors(obj, version=K8S_LATEST) -> list[str]:
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [f"{obj['kind']}: {e.message}"]
    return []


def pod_templates(obj):
    spec = obj["spec"]
    if obj["kind"] == "RayJob":
        spec = spec["rayClusterSpec"]
    yield "head", spec["headGroupSpec"]["template"]
    for g in spec["workerGroupSpecs"]:
        yield g["groupName"], g["template"]


def validate_all(s) -> None:
    rendered = manifests.render_all(s)
    for name, obj in rendered:
        if obj["apiVersion"].startswith("ray.io/"):
            errs = crd_errors(obj)
            for part, tmpl in pod_templates(obj):
                pt = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"x-{part}"}, "template": tmpl}
                errs += core_errors(pt) + core_errors(pt, s.aws.k8s_version)
        else:
            errs = core_errors(obj) + core_errors(obj, s.aws.k8s_version)
        assert not errs, f"{name}: {errs}"
    rc = dict(rendered)[next(n for n, _ in rendered if "-raycluster-" in n)]
    assert raycluster.check_raycluster(rc, s) == []
    job = [o for n, o in rendered if o["kind"] == "RayJob"][0]
    assert raycluster.check_rayjob(job, s) == []


# --------------------------------------------------------------------------------------------
# The matrix: 1-4 nodes x every known GPU instance type (4 and 8 GPUs) + a 1-GPU type
# --------------------------------------------------------------------------------------------

MATRIX = [(t, n) for t in sorted(config.INSTANCE_TYPES) for n in (1, 2, 3, 4)]


@pytest.mark.parametrize("itype,nodes", MATRIX)
def test_raycluster_matrix_validates(itype, nodes):
    gpus = config.INSTANCE_TYPES[itype]["gpus"]
    s = settings(gpu_node_type=itype, gpus_per_node=gpus, gpu_node_count=nodes)
    rc = raycluster.render_raycluster(s)
    assert crd_errors(rc) == []
    assert raycluster.check_raycluster(rc, s) == []
    g = rc["spec"]["workerGroupSpecs"][0]
    assert (g["replicas"], g["minReplicas"], g["maxReplicas"]) == (nodes, nodes, nodes)
    assert g["rayStartParams"]["num-gpus"] == str(gpus)
    assert raycluster.parse_ray_resources(g["rayStartParams"]["resources"]) == {"train_slot": gpus}
    c = g["template"]["spec"]["containers"][0]
    assert c["resources"]["requests"] == c["resources"]["limits"]
    assert c["resources"]["limits"]["vpc.amazonaws.com/efa"] == str(config.INSTANCE_TYPES[itype]["efa"])
    # what the sizing leaves for the node's daemons is real room, never negative
    shape = raycluster.gpu_node_shape(itype)
    assert cores(c["resources"]["limits"]["cpu"]) <= shape.allocatable_cpu_m / 1000 - 1
    assert gib(c["resources"]["limits"]["memory"]) <= shape.allocatable_mem_gib - 2


@pytest.mark.parametrize("itype,nodes", [("g6.12xlarge", 2), ("p5en.48xlarge", 4), ("g5.48xlarge", 1)])
def test_every_rendered_object_validates(itype, nodes):
    gpus = config.INSTANCE_TYPES[itype]["gpus"]
    validate_all(settings(gpu_node_type=itype, gpus_per_node=gpus, gpu_node_count=nodes))


def test_one_gpu_instance_type(monkeypatch):
    # g6.8xlarge: 1 L4, 32 vCPU, 128 GiB, 1 EFA interface (EFA-capable, on the plugin's allowlist)
    monkeypatch.setitem(
        config.INSTANCE_TYPES, "g6.8xlarge", dict(gpus=1, gpu_model="L4", gpu_mem_gib=24, vcpus=32, mem_gib=128, efa=1)
    )
    s = settings(gpu_node_type="g6.8xlarge", gpus_per_node=1, gpu_node_count=3)
    validate_all(s)
    rc = raycluster.render_raycluster(s)
    assert rc["spec"]["workerGroupSpecs"][0]["rayStartParams"]["num-gpus"] == "1"


def test_ray_pods_take_the_region_from_the_settings_not_the_metadata_service():
    s = settings(region="eu-north-1")
    for part, tmpl in pod_templates(raycluster.render_raycluster(s)):
        env = {e["name"]: e.get("value") for e in tmpl["spec"]["containers"][0]["env"]}
        assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "eu-north-1", part
        assert env["AWS_EC2_METADATA_DISABLED"] == "true", part


def test_a_digest_pinned_image_renders_and_validates():
    image = "public.ecr.aws/deep-learning-containers/ray:train-ml-cuda-v1.1@sha256:" + "ab" * 32
    s = settings(dlc_image=image)
    rc = raycluster.render_raycluster(s)
    assert crd_errors(rc) == [] and raycluster.check_raycluster(rc, s) == []
    assert {t["spec"]["containers"][0]["image"] for _, t in pod_templates(rc)} == {image}


def test_nccl_settings_reach_the_workers():
    s = settings(debug="WARN", env={"FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_DEBUG_SUBSYS": "INIT,NET"})
    rc = raycluster.render_raycluster(s)
    env = {e["name"]: e["value"] for e in rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["env"]}
    assert env["NCCL_DEBUG"] == "WARN"
    assert env["FI_EFA_USE_DEVICE_RDMA"] == "1" and env["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert env["FI_PROVIDER"] == "efa" and env["NCCL_NET_PLUGIN"] == "ofi"
    assert env["NCCL_SOCKET_IFNAME"] == "^lo,docker0,pod-id-link0"
    assert crd_errors(rc) == [] and raycluster.check_raycluster(rc, s) == []


def _worker(rc):
    return rc["spec"]["workerGroupSpecs"][0]


def test_missing_efa_request_fails_the_check():
    s = settings()
    rc = raycluster.render_raycluster(s)
    c = _worker(rc)["template"]["spec"]["containers"][0]
    for part in ("requests", "limits"):
        del c["resources"][part]["vpc.amazonaws.com/efa"]
    problems = raycluster.check_raycluster(rc, s)
    assert any("vpc.amazonaws.com/efa must be requested" in p and "TCP sockets" in p for p in problems), problems
    assert crd_errors(rc) == []  # the schema cannot see it: that is why the structural check exists


def test_schema_validators_are_not_vacuous():
    s = settings()
    rc = raycluster.render_raycluster(s)
    bad = copy.deepcopy(rc)
    _worker(bad)["replicas"] = "two"
    assert any("replicas" in e for e in crd_errors(bad))
    bad = copy.deepcopy(rc)
    bad["spec"]["headGroupSpec"]["rayStartParam"] = {}  # a typo: unknown field
    assert any("rayStartParam" in e for e in crd_errors(bad))
    bad = copy.deepcopy(rc)
    bad["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "6379"
    assert crd_errors(bad)
    sa = render_service_account(s)
    sa2 = copy.deepcopy(sa)
    sa2["automountServiceAccountTokenn"] = False
    assert core_errors(sa2) and not core_errors(sa)
    job = raycluster.render_rayjob(s)
    job2 = copy.deepcopy(job)
    job2["spec"]["shutdownAfterJobFinishes"] = "yes"
    assert crd_errors(job2) and raycluster.check_rayjob(job2, s)


def test_rayjob_carries_the_same_cluster_spec():
    s = settings(gpu_node_count=3, extra_pip=["einops==0.8.1"])
    job = raycluster.render_rayjob(s, working_dir="s3://bucket/raytrain/job.zip", submission_mode="HTTPMode")
    rc = raycluster.render_raycluster(s)
    assert job["spec"]["rayClusterSpec"] == rc["spec"]
    assert job["spec"]["entrypoint"] == "python -m raytrain_helpers.worker.entrypoint --config job_config.json"
    assert job["spec"]["submissionMode"] == "HTTPMode" and job["spec"]["shutdownAfterJobFinishes"] is True
    renv = yaml.safe_load(job["spec"]["runtimeEnvYAML"])
    assert renv == {"working_dir": "s3://bucket/raytrain/job.zip", "pip": ["einops==0.8.1"]}
    assert crd_errors(job) == [] and raycluster.check_rayjob(job, s) == []
    with pytest.raises(ValueError):
        raycluster.render_rayjob(s, submission_mode="SidecarModeX")


def test_the_helm_releases_are_pinned_and_written_with_their_install_command():
    s = settings()
    releases = {r["release"]: r for r in manifests.helm_releases(s)}
    assert list(releases) == ["nvidia-device-plugin", "raytrain-aws-efa-k8s-device-plugin", "kuberay-operator"]
    op = releases["kuberay-operator"]
    assert (op["chart"], op["version"], op["namespace"], op["create_namespace"]) == (
        "kuberay-operator",
        "1.7.0",
        "kuberay-system",
        True,
    )
    assert op["repo"] == "https://ray-project.github.io/kuberay-helm/" and op["values"] == {
        "nodeSelector": {"role": "system"}
    }
    docs = dict(manifests.helm_documents(s))
    text = docs["helm/kuberay-operator.values.yaml"]
    first, rest = text.split("\n", 1)
    assert first == (
        "# helm upgrade --install kuberay-operator kuberay-operator --repo https://ray-project.github.io/kuberay-helm/ "
        "--version 1.7.0 --namespace kuberay-system --create-namespace -f THIS_FILE"
    )
    assert yaml.safe_load(rest) == op["values"]
    efa = yaml.safe_load(docs["helm/raytrain-aws-efa-k8s-device-plugin.values.yaml"])
    assert efa["nodeSelector"] == {"role": "gpu-worker"}


# --------------------------------------------------------------------------------------------
# render_all / write_all
# --------------------------------------------------------------------------------------------


def test_render_all_order_and_names():
    names = [n for n, _ in manifests.render_all(settings())]
    kinds = [o["kind"] for _, o in manifests.render_all(settings())]
    assert len(names) == len(set(names))
    # the Helm releases come before (03, 04); the default-deny and the Ray pods' allow before any pod exists
    assert kinds[:5] == ["Namespace", "NetworkPolicy", "NetworkPolicy", "ServiceAccount", "RayCluster"]
    assert names[-1].startswith("alternatives/") and kinds[-1] == "RayJob"
    assert any(n.endswith("-raycluster-raytrain.yaml") for n in names)
    assert names == sorted(names[:-1]) + [names[-1]]  # file order = apply order
    assert [n for n, _ in manifests.render_all(settings(), include_alternatives=False)] == names[:-1]


def test_write_all_writes_one_object_per_file(tmp_path):
    paths = manifests.write_all(settings(), tmp_path / "out")
    objects = [n for n, _ in manifests.render_all(settings())]
    # the Kubernetes objects first (one per file), then the Helm values, the eksctl configs and the IAM documents in
    # sub-folders
    assert [str(p.relative_to(tmp_path / "out")) for p in paths] == objects + [
        n for n, _ in manifests.aws_documents(settings())
    ]
    text = paths[0].read_text()
    assert text.startswith(manifests.HEADER) and len([d for d in yaml.safe_load_all(text) if d]) == 1


# --------------------------------------------------------------------------------------------
# The pinned KubeRay: its CRDs, and the probes its operator gives the Ray containers
# --------------------------------------------------------------------------------------------


def test_raycluster_and_rayjob_are_valid_for_the_pinned_kuberay_and_get_http_probes():
    """Validated against ``schemas/kuberay/v1.7.0`` (KUBERAY_VERSION); both say ``rayVersion``, so the
    1.7.0 operator gives their Ray containers native HTTP probes instead of ``wget`` inside the DLC."""
    s = settings()
    assert s.versions.kuberay_version == "1.7.0"
    job = raycluster.render_rayjob(s, working_dir="s3://bucket/raytrain/job.zip")
    for obj, spec in ((raycluster.render_raycluster(s), None), (job, job["spec"]["rayClusterSpec"])):
        spec = spec or obj["spec"]
        assert crd_errors(obj) == [], obj["kind"]
        assert spec["rayVersion"] == s.versions.ray_version == "2.58.0"
        assert probes.probe_kind(s.versions.kuberay_version, spec["rayVersion"]) == "http"
        assert probes.probe_problems(spec, s) == []


@pytest.mark.parametrize(
    ("kuberay_version", "ray_version", "kind"),
    [
        ("1.4.0", "2.58.0", "wget"),  # v1.4.0: exec probes always
        ("1.5.2", "2.58.0", "wget"),
        ("1.6.0", "2.53.0", "http"),  # supportsUnifiedHealthCheck: Ray >= 2.53.0
        ("1.6.0", "2.52.1", "wget"),
        ("1.7.0", "2.58.0", "http"),
        ("1.7.0", "", "wget"),  # no rayVersion: ParseGeneric fails, exec probes
        ("1.7.0", "nightly", "wget"),
    ],
)
def test_probe_kind_follows_kuberay_source(kuberay_version, ray_version, kind):
    assert probes.probe_kind(kuberay_version, ray_version) == kind


def test_an_operator_that_would_probe_with_wget_is_refused_with_the_fix():
    old = settings(kuberay_version="1.4.0")
    rc = raycluster.render_raycluster(old)
    (problem,) = probes.probe_problems(rc["spec"], old)
    assert "wget" in problem and "KUBERAY_VERSION" in problem and "1.7.0" in problem
    s = settings()
    (problem,) = probes.probe_problems(dict(rc["spec"], rayVersion=""), s)
    assert "spec.rayVersion = ''" in problem and "RAY_VERSION" in problem
