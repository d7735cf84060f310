"""Statements the notebooks once made that the code or the tools' documentation contradict stay out, and every
chapter ends its teaching the same way: exercises (what to change, what to observe), a recap and the primary
docs, before its troubleshooting section. Pure: reads the text sources (``notebooks/src``) and the package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.plan import memory
from raytrain_helpers.present import commands

REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "notebooks" / "src"

#: (notebook, phrase that must not come back, why it was wrong)
WRONG = [
    ("04_kuberay", "each pod also has a link-local `pod-id-link0`", "the Pod Identity agent's link is on the node"),
    ("04_kuberay", "must agree with it", "KubeRay supports a range of Ray versions; the client must match"),
    ("04_kuberay", "no surprise throttling", "CPU limits are still enforced (CFS quota) under Guaranteed QoS"),
    ("05_train", "Every step reports its metrics", "reports go with the checkpoints and at the end"),
    ("05_train", "10-15 minutes on aws", "the time follows the settings: 01's prediction prints it"),
    ("06_verify", "`kubectl logs` of each worker pod)", "a pod's stdout does not carry the workers' lines"),
    ("06_verify", "several times slower", "the slowdown depends on the link; the article says a fraction"),
    ("08_teardown", "check the account and region in the first lines", "no account is printed there"),
]


def _text(name: str) -> str:
    return (SOURCES / f"{name}.md").read_text()


@pytest.mark.parametrize(("name", "phrase", "why"), WRONG, ids=[f"{n}:{p[:24]}" for n, p, _ in WRONG])
def test_a_corrected_statement_does_not_come_back(name, phrase, why):
    assert phrase not in _text(name), f"{name} says {phrase!r} again, which is wrong: {why}"


def test_nothing_says_seed_for_the_source_article():
    """The source article is called that: "the seed's figure" read like a random seed."""
    hits = [
        f"{p.relative_to(REPO)}:{i}"
        for root in ("notebooks/src", "raytrain_helpers", "tests", "docs")
        for p in sorted((REPO / root).rglob("*"))
        if p.suffix in (".md", ".py") and p.name != Path(__file__).name
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if re.search(r"seeds?'s? (figure|example|numbers|accounting)", line)
    ]
    assert not hits, hits
    assert any(label.startswith("the source article's figure") for label, _ in memory.article_plan().rows())


def test_the_row_names_what_fi_info_checks():
    from raytrain_helpers.targets.aws import kuberay

    assert "RDM endpoint" in kuberay.INFRA_FI and "RDMA" not in kuberay.INFRA_FI


def test_the_typed_apply_carries_the_service_account_the_raycluster_names(repo_root, clean_env):
    s = config.load(repo_root / "env.yaml", environ={}, target="aws")
    shown = commands.equivalent_commands("kuberay", s)
    apply = next(c for _, c in shown.commands if c.startswith("kubectl apply"))
    assert f"-serviceaccount-{s.kubernetes.service_account}.yaml" in apply, apply
    assert apply.index("-namespace-") < apply.index("-serviceaccount-") < apply.index("-raycluster-")


#: The primary docs every chapter's "Learn more" may point to (checked with the project's search, 2026-12-04).
PRIMARY_DOCS = (
    "https://docs.ray.io/",
    "https://docs.aws.amazon.com/",
    "https://docs.nvidia.com/deeplearning/nccl/",
    "https://kubernetes.io/docs/",
    "https://eksctl.io/",
    "https://manpages.ubuntu.com/manpages/noble/man7/fi_efa.7.html",
)


@pytest.mark.parametrize("name", sorted(p.stem for p in SOURCES.glob("*.md")))
def test_every_chapter_ends_with_exercises_a_recap_and_the_docs(name):
    text = _text(name)
    tail = text[text.index("## Exercises") : text.index("## Troubleshooting")]  # ValueError: a section is missing
    exercises = re.findall(r"^\d+\. \*\*.+?\*\*", tail, re.M)
    # two or three on the settings; 05 adds two that change the code (tests/unit/worker/test_memory_lab.py runs them)
    assert 2 <= len(exercises) <= (5 if name == "05_train" else 3), f"{name}: {len(exercises)} exercises"
    assert tail.count("*Observe:*") == len(exercises), f"{name}: every exercise says what to observe"
    assert "**Recap.**" in tail and "**Learn more**" in tail, name
    links = re.findall(r"\]\((https?://[^)\s]+)\)", tail[tail.index("**Learn more**") :])
    assert len(links) >= 2 and all(u.startswith(PRIMARY_DOCS) for u in links), (name, links)
    assert "```{code-cell}" not in tail, f"{name}: the exercises are prose only (no new code cell)"
