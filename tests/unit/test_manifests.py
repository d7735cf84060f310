"""Every rendered manifest against the real schemas, across a matrix of env.yaml values.

* core kinds (DaemonSet, Deployment, RBAC, Namespace...) with kubernetes-validate, strict, at the newest
  Kubernetes minor it ships, and at the cluster's K8S_VERSION;
* RayCluster / RayJob with jsonschema against the openAPIV3Schema of the KubeRay v1.4.0 CRDs in
  ``<repo>/../shared/kuberay-crds`` (made strict: unknown fields are errors, as ``kubectl --validate=strict``);
  their pod templates also as core ``PodTemplate`` objects;
* :func:`kuberay.check_raycluster` (the structural check ``kuberay.step`` runs before applying) passes for
  every rendered cluster and fails for the broken ones.
"""

from __future__ import annotations

import copy
import functools
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CRD_ROOT = REPO / "../shared/kuberay-crds"
sys.path.insert(0, str(REPO))

from raytrain_helpers import config, k8s, kuberay, plugins, render  # noqa: E402

kubernetes_validate = pytest.importorskip("kubernetes_validate")
jsonschema = pytest.importorskip("jsonschema")


def cores(q) -> float:
    return k8s.quantity(q)


def gib(q) -> float:
    return k8s.quantity(q) / 2**30


def settings(**params):
    base = dict(target="aws")
    base.update(params)
    return config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, **base)


# --------------------------------------------------------------------------------------------
# Schemas
# --------------------------------------------------------------------------------------------

def _strict(schema):
    """Unknown fields become errors where the CRD does not preserve them."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(x) for x in schema]
    return schema


@functools.lru_cache(maxsize=None)
def crd_validator(kind: str, kuberay_version: str = "1.4.0"):
    d = CRD_ROOT / f"v{kuberay_version}"
    if not d.is_dir():
        pytest.skip(f"KubeRay CRDs not found at {d.resolve()} (CI clones the repo with shared/ beside it); "
                    f"the RayCluster/RayJob schema checks need them")
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
    rendered = render.render_all(s)
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
    assert kuberay.check_raycluster(rc, s) == []
    job = [o for n, o in rendered if o["kind"] == "RayJob"][0]
    assert kuberay.check_rayjob(job, s) == []


# --------------------------------------------------------------------------------------------
# The matrix: 1-4 nodes x every known GPU instance type (4 and 8 GPUs) + a 1-GPU type
# --------------------------------------------------------------------------------------------

MATRIX = [(t, n) for t in sorted(config.INSTANCE_TYPES) for n in (1, 2, 3, 4)]


@pytest.mark.parametrize("itype,nodes", MATRIX)
def test_raycluster_matrix_validates(itype, nodes):
    gpus = config.INSTANCE_TYPES[itype]["gpus"]
    s = settings(gpu_node_type=itype, gpus_per_node=gpus, gpu_node_count=nodes)
    rc = kuberay.render_raycluster(s)
    assert crd_errors(rc) == []
    assert kuberay.check_raycluster(rc, s) == []
    g = rc["spec"]["workerGroupSpecs"][0]
    assert (g["replicas"], g["minReplicas"], g["maxReplicas"]) == (nodes, nodes, nodes)
    assert g["rayStartParams"]["num-gpus"] == str(gpus)
    assert kuberay.parse_ray_resources(g["rayStartParams"]["resources"]) == {"train_slot": gpus}
    c = g["template"]["spec"]["containers"][0]
    assert c["resources"]["requests"] == c["resources"]["limits"]
    assert c["resources"]["limits"]["vpc.amazonaws.com/efa"] == str(config.INSTANCE_TYPES[itype]["efa"])
    # what the sizing leaves for the node's daemons is real room, never negative
    shape = kuberay.gpu_node_shape(itype)
    assert cores(c["resources"]["limits"]["cpu"]) <= shape.allocatable_cpu_m / 1000 - 1
    assert gib(c["resources"]["limits"]["memory"]) <= shape.allocatable_mem_gib - 2


@pytest.mark.parametrize("itype,nodes", [("g6.12xlarge", 2), ("p5en.48xlarge", 4), ("g5.48xlarge", 1)])
def test_every_rendered_object_validates(itype, nodes):
    gpus = config.INSTANCE_TYPES[itype]["gpus"]
    validate_all(settings(gpu_node_type=itype, gpus_per_node=gpus, gpu_node_count=nodes))


def test_one_gpu_instance_type(monkeypatch):
    # g6.8xlarge: 1 L4, 32 vCPU, 128 GiB, 1 EFA interface (EFA-capable, on the plugin's allowlist)
    monkeypatch.setitem(config.INSTANCE_TYPES, "g6.8xlarge",
                        dict(gpus=1, gpu_model="L4", gpu_mem_gib=24, vcpus=32, mem_gib=128, efa=1))
    s = settings(gpu_node_type="g6.8xlarge", gpus_per_node=1, gpu_node_count=3)
    validate_all(s)
    rc = kuberay.render_raycluster(s)
    assert rc["spec"]["workerGroupSpecs"][0]["rayStartParams"]["num-gpus"] == "1"


def test_nccl_settings_reach_the_workers():
    s = settings(debug="WARN", env={"FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_DEBUG_SUBSYS": "INIT,NET"})
    rc = kuberay.render_raycluster(s)
    env = {e["name"]: e["value"] for e in rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["env"]}
    assert env["NCCL_DEBUG"] == "WARN"
    assert env["FI_EFA_USE_DEVICE_RDMA"] == "1" and env["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert env["FI_PROVIDER"] == "efa" and env["NCCL_NET_PLUGIN"] == "ofi"
    assert env["NCCL_SOCKET_IFNAME"] == "^lo,docker0,pod-id-link0"
    assert crd_errors(rc) == [] and kuberay.check_raycluster(rc, s) == []


def test_head_is_sized_for_the_system_node():
    s = settings()
    rc = kuberay.render_raycluster(s)
    head = rc["spec"]["headGroupSpec"]
    c = head["template"]["spec"]["containers"][0]
    assert head["rayStartParams"]["num-gpus"] == "0"
    assert c["resources"]["requests"] == c["resources"]["limits"]
    node = kuberay.system_node_shape("m7i.xlarge")
    assert (node.vcpus, node.mem_gib) == (4, 16)
    # room for kube-system and the operator: at least 1 core and 3 GiB stay free
    assert cores(c["resources"]["limits"]["cpu"]) <= node.allocatable_cpu_m / 1000 - 1
    assert gib(c["resources"]["limits"]["memory"]) <= node.allocatable_mem_gib - 3
    bigger = kuberay.render_raycluster(settings(system_node_type="m7i.2xlarge"))
    bc = bigger["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert cores(bc["resources"]["limits"]["cpu"]) > cores(c["resources"]["limits"]["cpu"])


def test_too_small_or_unknown_system_node_is_a_clear_error():
    with pytest.raises(config.ConfigError, match=r"system_node_type.*too small.*m7i\.xlarge"):
        kuberay.render_raycluster(settings(system_node_type="m7i.large"))
    with pytest.raises(config.ConfigError, match=r"SYSTEM_NODE_TYPE.*cannot size"):
        kuberay.render_raycluster(settings(system_node_type="g6.xlarge"))


# --------------------------------------------------------------------------------------------
# Negative checks: broken manifests must fail
# --------------------------------------------------------------------------------------------

def _worker(rc):
    return rc["spec"]["workerGroupSpecs"][0]


def test_missing_efa_request_fails_the_check():
    s = settings()
    rc = kuberay.render_raycluster(s)
    c = _worker(rc)["template"]["spec"]["containers"][0]
    for part in ("requests", "limits"):
        del c["resources"][part]["vpc.amazonaws.com/efa"]
    problems = kuberay.check_raycluster(rc, s)
    assert any("vpc.amazonaws.com/efa must be requested" in p and "TCP sockets" in p for p in problems), problems
    assert crd_errors(rc) == []   # the schema cannot see it: that is why the structural check exists


def test_missing_shm_volume_fails_the_check():
    s = settings()
    rc = kuberay.render_raycluster(s)
    spec = _worker(rc)["template"]["spec"]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "dshm"]
    assert any("/dev/shm" in p for p in kuberay.check_raycluster(rc, s))
    rc2 = kuberay.render_raycluster(s)
    for v in _worker(rc2)["template"]["spec"]["volumes"]:
        if v["name"] == "dshm":
            v["emptyDir"].pop("medium")            # a disk-backed /dev/shm is no better
    assert any("memory-backed" in p for p in kuberay.check_raycluster(rc2, s))


@pytest.mark.parametrize("value", [None, "1", "4"])
def test_head_num_gpus_must_be_zero(value):
    s = settings()
    rc = kuberay.render_raycluster(s)
    params = rc["spec"]["headGroupSpec"]["rayStartParams"]
    if value is None:
        del params["num-gpus"]
    else:
        params["num-gpus"] = value
    assert any('num-gpus must be "0"' in p for p in kuberay.check_raycluster(rc, s))


def test_more_structural_failures():
    s = settings()
    cases = {
        "rayVersion": lambda rc: rc["spec"].__setitem__("rayVersion", "2.9.0"),
        "NCCL_SOCKET_IFNAME": lambda rc: _env_set(rc, "NCCL_SOCKET_IFNAME", "^lo,docker0"),
        "FI_PROVIDER": lambda rc: _env_set(rc, "FI_PROVIDER", "tcp"),
        "train_slot": lambda rc: _worker(rc)["rayStartParams"].__setitem__("resources", '{"train_slot": 4}'),
        "replicas": lambda rc: _worker(rc).__setitem__("maxReplicas", 5),
        "aws.amazon.com/efa taint": lambda rc: _worker(rc)["template"]["spec"]["tolerations"].pop(),
        "request": lambda rc: _worker(rc)["template"]["spec"]["containers"][0]["resources"]["limits"]
        .__setitem__("memory", "200Gi"),
        "image": lambda rc: _worker(rc)["template"]["spec"]["containers"][0].__setitem__("image", "ray:latest"),
        "role=system": lambda rc: rc["spec"]["headGroupSpec"]["template"]["spec"].pop("nodeSelector"),
    }
    for needle, breaker in cases.items():
        rc = kuberay.render_raycluster(s)
        breaker(rc)
        problems = kuberay.check_raycluster(rc, s)
        assert any(needle in p for p in problems), (needle, problems)


def _env_set(rc, name, value):
    for e in _worker(rc)["template"]["spec"]["containers"][0]["env"]:
        if e["name"] == name:
            e["value"] = value


def test_resources_param_survives_the_shell():
    v = kuberay.resources_param(8)
    assert kuberay.parse_ray_resources(v) == {"train_slot": 8}
    # unquoted JSON is split by the shell (or loses its quotes): what Ray would receive is not the JSON
    assert kuberay.parse_ray_resources('{"train_slot": 8}') is None
    assert kuberay.parse_ray_resources('{"train_slot":8}') is None


def test_schema_validators_are_not_vacuous():
    s = settings()
    rc = kuberay.render_raycluster(s)
    bad = copy.deepcopy(rc)
    _worker(bad)["replicas"] = "two"
    assert any("replicas" in e for e in crd_errors(bad))
    bad = copy.deepcopy(rc)
    bad["spec"]["headGroupSpec"]["rayStartParam"] = {}          # a typo: unknown field
    assert any("rayStartParam" in e for e in crd_errors(bad))
    bad = copy.deepcopy(rc)
    bad["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "6379"
    assert crd_errors(bad)
    ds = plugins.render_plugins(s)[0]
    ds2 = copy.deepcopy(ds)
    ds2["spec"]["template"]["spec"]["tolerations"][0]["keyy"] = "x"
    assert core_errors(ds2) and not core_errors(ds)
    job = kuberay.render_rayjob(s)
    job2 = copy.deepcopy(job)
    job2["spec"]["shutdownAfterJobFinishes"] = "yes"
    assert crd_errors(job2) and kuberay.check_rayjob(job2, s)


def test_rayjob_carries_the_same_cluster_spec():
    s = settings(gpu_node_count=3, extra_pip=["einops==0.8.1"])
    job = kuberay.render_rayjob(s, working_dir="s3://bucket/raytrain/job.zip", submission_mode="HTTPMode")
    rc = kuberay.render_raycluster(s)
    assert job["spec"]["rayClusterSpec"] == rc["spec"]
    assert job["spec"]["entrypoint"] == "python -m raytrain_helpers.entrypoint --config job_config.json"
    assert job["spec"]["submissionMode"] == "HTTPMode" and job["spec"]["shutdownAfterJobFinishes"] is True
    renv = yaml.safe_load(job["spec"]["runtimeEnvYAML"])
    assert renv == {"working_dir": "s3://bucket/raytrain/job.zip", "pip": ["einops==0.8.1"]}
    assert crd_errors(job) == [] and kuberay.check_rayjob(job, s) == []
    with pytest.raises(ValueError):
        kuberay.render_rayjob(s, submission_mode="SidecarModeX")


# --------------------------------------------------------------------------------------------
# Device plugins and the operator
# --------------------------------------------------------------------------------------------

def test_plugins_are_pinned_and_selected_onto_gpu_nodes():
    s = settings()
    nv, efa = plugins.render_plugins(s)
    nspec, espec = nv["spec"]["template"]["spec"], efa["spec"]["template"]["spec"]
    assert nspec["containers"][0]["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    assert espec["containers"][0]["image"].endswith("/eks/aws-efa-k8s-device-plugin:v0.5.21-eksbuild.13")
    for spec in (nspec, espec):
        assert spec["nodeSelector"] == {"role": "gpu-worker"}
        keys = {t["key"] for t in spec["tolerations"] if t.get("effect") == "NoSchedule"}
        assert {"nvidia.com/gpu", "aws.amazon.com/efa"} <= keys
    terms = espec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    allow = terms[0]["matchExpressions"][0]["values"]
    assert set(config.INSTANCE_TYPES) <= set(allow)     # every instance type the tutorial offers can get EFA
    with pytest.raises(config.ConfigError, match="EFA_DEVICE_PLUGIN_VERSION"):
        plugins.render_plugins(settings(efa_device_plugin_version="v0.4.4"))


def test_operator_manifest_is_pinned():
    s = settings(kuberay_version="1.4.0")
    objs = kuberay.render_operator(s)
    dep = [o for o in objs if o["kind"] == "Deployment"][0]
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "quay.io/kuberay/operator:v1.4.0"
    assert dep["spec"]["template"]["spec"]["nodeSelector"] == {"role": "system"}
    assert kuberay.operator_version(dep) == "v1.4.0"
    for o in objs:
        assert core_errors(o) == []


# --------------------------------------------------------------------------------------------
# render_all and the CLI
# --------------------------------------------------------------------------------------------

def test_render_all_order_and_names():
    names = [n for n, _ in render.render_all(settings())]
    kinds = [o["kind"] for _, o in render.render_all(settings())]
    assert len(names) == len(set(names))
    assert kinds.index("Namespace") < kinds.index("Deployment") < kinds.index("RayCluster")
    assert names[-1].startswith("alternatives/") and kinds[-1] == "RayJob"
    assert any(n.endswith("-raycluster-raytrain.yaml") for n in names)
    assert names == sorted(names[:-1]) + [names[-1]]    # file order = apply order


def _cli(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "raytrain_helpers.cli", *args], cwd=cwd, capture_output=True,
                          text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=120)


def test_render_cli_writes_one_object_per_file(tmp_path):
    out = tmp_path / "manifests"
    r = _cli("render", "--target", "aws", "-p", "gpu_node_count", "3", "--out", str(out))
    assert r.returncode == 0, r.stderr
    files = sorted(p for p in out.rglob("*.yaml"))
    assert len(files) == len(render.render_all(settings()))
    for f in files:
        docs = [d for d in yaml.safe_load_all(f.read_text()) if d]
        assert len(docs) == 1, f
    rc = yaml.safe_load((next(out.glob("*-raycluster-raytrain.yaml"))).read_text())
    assert rc["spec"]["workerGroupSpecs"][0]["replicas"] == 3
    assert (out / "alternatives").is_dir()


def test_render_cli_stdout(monkeypatch, capsys):
    from raytrain_helpers import cli
    monkeypatch.setattr(config, "_check_ray_version", lambda *a, **k: None)   # importing ray is slow
    monkeypatch.chdir(REPO)
    assert cli.main(["render", "--target", "aws", "-p", "gpu_node_count", "3"]) == 0
    out = capsys.readouterr().out
    rendered = render.render_all(settings(gpu_node_count=3))
    assert out.count("# file: ") == len(rendered)
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert docs == [o for _, o in rendered]
    assert cli.main(["render", "--target", "aws", "--no-alternatives"]) == 0
    assert "RayJob" not in capsys.readouterr().out


def test_render_cli_rejects_bad_settings(monkeypatch, capsys):
    from raytrain_helpers import cli
    monkeypatch.setattr(config, "_check_ray_version", lambda *a, **k: None)
    monkeypatch.chdir(REPO)
    assert cli.main(["render", "--target", "aws", "-p", "gpus_per_node", "3"]) == 2
    assert "gpus_per_node" in capsys.readouterr().err
