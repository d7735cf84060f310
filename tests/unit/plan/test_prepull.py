"""plan.prepull: the pre-pull DaemonSet against the Kubernetes schema and the restricted Pod Security level, the
kubelet's Pulled messages, and the walkthrough estimate with a recorded pull time."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from raytrain_helpers.plan import pod_security, prepull, walkthrough
from tests.helpers import aws_settings

K8S_LATEST = kubernetes_validate.utils.latest_version()


def _errors(obj, version) -> list[str]:
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [e.message]
    return []


def test_the_daemonset_validates_and_asks_for_no_gpu():
    s = aws_settings()
    ds = prepull.render_prepull(s)
    assert _errors(ds, K8S_LATEST) == [] and _errors(ds, s.aws.k8s_version) == []
    spec = ds["spec"]["template"]["spec"]
    assert pod_security.restricted_problems(spec) == []
    (c,) = spec["containers"]
    assert c["image"] == s.versions.dlc_image
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in c["env"]  # no GPU from the image's own env
    assert set(c["resources"]["requests"]) == {"cpu", "memory"}  # no nvidia.com/gpu, no EFA
    assert spec["nodeSelector"] == {"role": "gpu-worker"}
    assert {t["key"] for t in spec["tolerations"]} == {"nvidia.com/gpu", "aws.amazon.com/efa"}
    assert ds["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "raytrain-tutorial"


@pytest.mark.parametrize(
    "message,seconds",
    [
        (
            'Successfully pulled image "IMG" in 1m2.345s (1m2.4s including waiting). Image size: 9876543210 bytes.',
            62.345,
        ),
        ('Successfully pulled image "IMG" in 850ms (850ms including waiting)', 0.85),  # before Kubernetes 1.30
        ('Successfully pulled image "IMG" in 1h2m3s (1h2m3s including waiting). Image size: 1 bytes.', 3723.0),
        ('Container image "IMG" already present on machine', None),
        ('Successfully pulled image "OTHER" in 5s (5s including waiting)', None),
    ],
)
def test_the_kubelets_pulled_message(message, seconds):
    assert prepull.pulled_seconds(message, "IMG") == seconds


def test_pull_times_per_node_from_the_events():
    pods = [{"metadata": {"uid": u}, "spec": {"nodeName": n}} for u, n in (("a", "n1"), ("b", "n2"), ("c", "n1"))]
    ev = lambda uid, msg, reason="Pulled": {"reason": reason, "message": msg, "involvedObject": {"uid": uid}}  # noqa: E731
    events = [
        ev("a", 'Successfully pulled image "IMG" in 20m0s (20m1s including waiting)'),
        ev("b", 'Successfully pulled image "IMG" in 25m30s (25m30s including waiting)'),
        ev("c", 'Container image "IMG" already present on machine'),
        ev("a", 'Pulling image "IMG"', reason="Pulling"),
    ]
    assert prepull.pull_times(events, pods, "IMG") == {"n1": 1200.0, "n2": 1530.0}


def test_cost_uses_the_recorded_pull_time(tmp_path, monkeypatch):
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path))
    s = aws_settings()
    assumed = walkthrough.chapter_minutes(s, "04")
    assert assumed == walkthrough.ALLOWANCES["kuberay"][0] + walkthrough.IMAGE_PULL_MIN
    assert not (tmp_path / s.run_name).exists()  # reading creates no folder
    prepull.save(s, {"n1": 600.0, "n2": 720.0}, source="test")
    est = walkthrough.estimate(s)
    (p04,) = [p for p in est.phases if p.notebook == "04"]
    assert p04.minutes == walkthrough.ALLOWANCES["kuberay"][0] + 12.0
    assert "12.0 min recorded" in p04.what and "image-pulls.json" in p04.source
    # a record of another image is not this run's pull
    doc = json.loads((tmp_path / s.run_name / prepull.RECORD).read_text())
    doc["image"] = "public.ecr.aws/x/y:other"
    (tmp_path / s.run_name / prepull.RECORD).write_text(json.dumps(doc))
    assert walkthrough.chapter_minutes(s, "04") == assumed
