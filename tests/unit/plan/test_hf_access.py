"""The Hugging Face token reaches the head too: the job's driver runs there and reads a gated model's config and
tokenizer, so a token the workers alone get fails the job before any worker starts."""

from __future__ import annotations

import copy

from raytrain_helpers.plan import raycluster
from tests.unit.plan.test_iam import settings
from tests.unit.plan.test_manifests import crd_errors

REF = {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN", "optional": True}}


def _containers(obj):
    spec = obj["spec"].get("rayClusterSpec") or obj["spec"]
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    return head, spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]


def _token(container):
    return [e for e in container.get("env") or [] if e["name"] == "HF_TOKEN"]


def test_head_and_workers_get_the_token_from_the_optional_secret_and_only_when_one_is_named():
    s = settings(hf_token_secret="hf-token")
    for obj in (raycluster.render_raycluster(s), raycluster.render_rayjob(s)):
        assert crd_errors(obj) == []
        head, worker = _containers(obj)
        assert _token(head) == _token(worker) == [{"name": "HF_TOKEN", "valueFrom": REF}]
        assert raycluster.check_cluster_spec(obj["spec"].get("rayClusterSpec") or obj["spec"], s, "x") == []
    head, worker = _containers(raycluster.render_raycluster(settings()))
    assert _token(head) == _token(worker) == []


def test_a_head_without_the_token_is_named_with_the_fix():
    s = settings(hf_token_secret="hf-token")
    bad = copy.deepcopy(raycluster.render_raycluster(s))
    head, _ = _containers(bad)
    head["env"] = [e for e in head["env"] if e["name"] != "HF_TOKEN"]
    problems = raycluster.check_raycluster(bad, s)
    assert problems == [
        "head: no HF_TOKEN from Secret 'hf-token' (kubernetes.hf_token_secret): a gated model would fail there. "
        "Fix: render the RayCluster again (the head and every worker group get it)"
    ]


def test_a_literal_token_on_the_head_or_another_secret_is_refused():
    s = settings(hf_token_secret="hf-token")
    bad = copy.deepcopy(raycluster.render_raycluster(s))
    head, worker = _containers(bad)
    (h,) = _token(head)
    h.pop("valueFrom")
    h["value"] = "hf_xxx"
    (w,) = _token(worker)
    w["valueFrom"]["secretKeyRef"]["name"] = "other"
    problems = raycluster.check_raycluster(bad, s)
    assert problems == [
        "head: HF_TOKEN must come from an optional secretKeyRef, never a literal value. Fix: "
        "kubernetes.hf_token_secret names the Secret",
        "worker group 'gpu-efa': HF_TOKEN comes from Secret 'other', not kubernetes.hf_token_secret 'hf-token'. "
        "Fix: render the RayCluster again",
    ], problems
