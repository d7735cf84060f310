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
    ("04_kuberay", "the operator recreates the worker pods", "KubeRay 1.7 recreates pods only with upgradeStrategy"),
    ("01_capacity", "set `gpus_per_node: 8`", "the settings form has no gpus_per_node field"),
    ("03_plugins", "name=nvidia-device-plugin-ds", "the NVIDIA chart labels its pods app.kubernetes.io/name"),
    ("05_train", "never holds more than a block or two", "the root unit stays gathered from forward to backward"),
    ("05_train", "save little memory", "root-only sharding still shards gradients and optimizer state"),
    ("05_train", "33-39 %", "no source; the project's measured MFU is in benchmarks/results"),
    ("05_train", "about 30 s on aws", "nothing was timed on aws: an estimate says so"),
    ("02_cluster", "`withOIDC` and the `eks-pod-identity-agent` add-on let", "OIDC is for IRSA, not Pod Identity"),
    ("03_plugins", "2-5 minutes on aws", "the aws times are the walkthrough's estimates"),
    ("04_kuberay", "up to 30-40 minutes the first time", "the aws times are the walkthrough's estimates"),
    ("01_capacity", "sum over all ranks of the gradient", "FSDP2 reduce-scatters with ReduceOp.AVG (fp32/bf16)"),
    ("01_capacity", "The efficiency factors were measured", "plan/perf.py marks most factors assumed"),
    ("01_capacity", "control plane alone averages 15", "the thread cited quotes about 9 minutes on average"),
    ("03_plugins", "EKS nodes lack", "02's node group sets nvidia.com/gpu.present itself"),
    ("06_verify", "random letters or `<eos>`", "the untrained model repeats the prompt's last letter"),
    ("04_kuberay", "EKS set their credentials when they were", "the agent serves them until the session expires"),
    ("06_verify", "then run 05 and 06 with `-f` that file", "05's check stops, and the default run is complete"),
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
    from raytrain_helpers.targets.aws.jobs import rows

    assert "RDM endpoint" in rows.INFRA_FI and "RDMA" not in rows.INFRA_FI


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
    observes = re.findall(r"\*Observe(?: \([^)]*\))?:\*", tail)
    assert len(observes) == len(exercises), f"{name}: every exercise says what to observe"
    assert "**Recap.**" in tail and "**Learn more**" in tail, name
    links = re.findall(r"\]\((https?://[^)\s]+)\)", tail[tail.index("**Learn more**") :])
    assert len(links) >= 2 and all(u.startswith(PRIMARY_DOCS) for u in links), (name, links)
    assert "```{code-cell}" not in tail, f"{name}: the exercises are prose only (no new code cell)"


#: Prose that names a part of the output it follows: a column (`X` column, column `X`, the `X` and `Y` columns), a
#: row (the row *X*, *X* row), or the verdict line (the verdict (`X` / the verdict: `X`). Each named part must be in
#: the output the prose reads (the committed output of the code cells just before it).
NAMED = re.compile(
    r"`([^`\n]+)`(?: and `([^`\n]+)`)? columns?\b|\bcolumns? `([^`\n]+)`"
    r"|\brows? \*([^*\n]+)\*|\*([^*\n]+)\* rows?\b"
    r"|\bverdict:? \(?`([^`\n]+)`"
)
#: A sentence about another target or case than the committed run (executed on local CPU workers) is not checked.
OTHER_CASE = re.compile(r"\baws\b|\bEKS\b|\blocal GPUs\b|\bfail|\bFAIL\b|\bwhen\b", re.I)


def named_but_not_shown(cells: list[tuple[str, str]], checked: list[str] | None = None) -> list[str]:
    """``cells``: (kind, text) in order, where a code cell's text is its output. The parts the prose after a code
    cell names (columns, rows, the verdict) that its output does not contain, as "name | sentence"; every part
    looked at is appended to ``checked``."""
    missing, shown = [], None
    checked = [] if checked is None else checked
    for kind, text in cells:
        if kind == "code":
            shown = text or None  # a cell without committed output (nbval-ignore-output) is not checked
            continue
        if shown is None:
            continue
        for sentence in re.split(r"(?<=[.;])\s+", text):
            if OTHER_CASE.search(sentence):
                continue
            for m in NAMED.finditer(sentence):
                checked += [g for g in m.groups() if g]
                missing += [f"{g} | {' '.join(sentence.split())[:100]}" for g in m.groups() if g and g not in shown]
    return missing


def _outputs(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        data = out.get("data") or {}
        text = out.get("text") or data.get("text/plain") or data.get("text/html") or ""
        parts.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(parts)


def test_a_named_part_missing_from_the_output_is_caught():
    cells = [("code", "| node | train slots |\nverdict: OK"), ("markdown", "The `memory` column counts bytes.")]
    assert named_but_not_shown(cells) == ["memory | The `memory` column counts bytes."]
    cells[1] = ("markdown", "The `train slots` column, the row *node*, and the verdict (`OK`).")
    assert named_but_not_shown(cells) == []
    cells[1] = ("markdown", "On aws the `GPU` column counts GPUs.")  # another target: not this output
    assert named_but_not_shown(cells) == []


def _prose_and_outputs(build, name: str) -> list[tuple[str, str]]:
    """The text source's cells of a chapter, each code cell replaced by the committed output of the same code."""
    import nbformat

    committed = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
    outputs = {c.source: _outputs(c) for c in committed.cells if c.cell_type == "code"}
    source = build.read_source(SOURCES / f"{name}.md")
    return [
        ("code", outputs.get(c.source, "")) if c.cell_type == "code" else ("markdown", c.source) for c in source.cells
    ]


@pytest.mark.parametrize("name", sorted(p.stem for p in SOURCES.glob("*.md")))
def test_prose_names_only_what_the_output_before_it_shows(build, name):
    """What a chapter's prose says a table shows (a column, a row, the verdict) is in that table, for the run the
    committed notebook holds (the text source's prose against the committed outputs of the same code cells)."""
    missing = named_but_not_shown(_prose_and_outputs(build, name))
    assert not missing, missing


def test_the_named_parts_check_reads_something(build):
    """Across the chapters some prose names a column, a row or a verdict of the output before it: the check above
    is not vacuous."""
    checked: list[str] = []
    for p in sorted(SOURCES.glob("*.md")):
        named_but_not_shown(_prose_and_outputs(build, p.stem), checked)
    assert len(checked) >= 3, checked


# ---- statements tied to the code or the tools they describe ----


def test_01s_gradient_reduction_is_the_average_fsdp2_uses():
    """torch 2.13 ``_fsdp_collectives._get_gradient_divide_factors``: with fp32/bf16 gradients and more than one
    rank, FSDP2 reduce-scatters with ``ReduceOp.AVG``; 01 says average, and names it."""
    import torch
    from torch.distributed import ReduceOp
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives as coll

    class Group:
        def size(self):
            return 8

    *_, reduce_scatter_op, _ = coll._get_gradient_divide_factors(Group(), None, torch.float32)
    assert reduce_scatter_op == ReduceOp.AVG
    assert "average over all ranks (`ReduceOp.AVG`)" in _text("01_capacity")


def test_the_aws_workers_force_the_efa_network_and_07s_baseline_overrides_it(repo_root, clean_env):
    """04 teaches NCCL_NET: the worker pods carry NCCL_NET=Libfabric (aws-ofi-nccl 1.20's name), 07's socket
    variant sets NCCL_NET=Socket for its job, and a learner's nccl.env still wins over the pod's value."""
    from raytrain_helpers.plan import ray_pods
    from raytrain_helpers.targets.aws.jobs import defaults

    s = config.load(repo_root / "env.yaml", environ={}, target="aws")
    assert dict(ray_pods.worker_env(s))["NCCL_NET"] == "Libfabric" == ray_pods.NCCL_NET_EFA
    variants = {v["label"]: v["env"] for v in defaults.benchmark_variants(s)}
    assert variants["socket"]["NCCL_NET"] == "Socket" and variants["efa"]["NCCL_NET"] == "Libfabric"
    forced = config.load(repo_root / "env.yaml", environ={}, target="aws", **{"nccl.env": {"NCCL_NET": "Socket"}})
    assert dict(ray_pods.worker_env(forced))["NCCL_NET"] == "Socket"
    text = " ".join(_text("04_kuberay").split())
    assert "`NCCL_NET=Libfabric`" in text and "`Libfabric`" in text and "`NCCL_NET=Socket`" in text


def test_naming_the_plugin_in_nccl_net_is_not_taken_for_forcing_tcp():
    from raytrain_helpers.steps import transport

    assert "forces TCP" in transport.fix_for("efa", {"NCCL_NET": "Socket"})
    assert "forces TCP" not in transport.fix_for("efa", {"NCCL_NET": "Libfabric"})


def test_01_says_which_efficiency_factors_were_measured_and_which_assumed():
    from raytrain_helpers.plan import perf

    assumed = [k for k, (_, why) in perf.CALIBRATION.items() if "not measured" in why or "assumed" in why]
    assert len(assumed) >= 4, assumed
    text = " ".join(_text("01_capacity").split())
    assert "are assumed" in text and "`CALIBRATION`" in text


def test_01s_control_plane_minutes_are_the_source_s():
    from raytrain_helpers.plan import walkthrough

    assert "9 minutes on an average" in walkthrough.ALLOWANCES["cluster"][1]
    assert "about 9 minutes on average" in " ".join(_text("01_capacity").split())


def test_03_knows_02s_node_group_sets_the_gpu_present_label(repo_root):
    template = (repo_root / "manifests" / "eksctl-gpu-nodegroup.yaml.j2").read_text()
    assert 'nvidia.com/gpu.present: "true"' in template
    assert "02's node group sets\n`nvidia.com/gpu.present" in _text("03_plugins") or "02's node group sets" in _text(
        "03_plugins"
    )


def test_04s_equivalent_commands_apply_both_network_policies(repo_root, clean_env):
    from raytrain_helpers.plan import raycluster

    s = config.load(repo_root / "env.yaml", environ={}, target="aws")
    apply = next(c for _, c in commands.equivalent_commands("kuberay", s).commands if c.startswith("kubectl apply"))
    for name in raycluster.NETWORK_POLICIES:
        assert f"-networkpolicy-{name}.yaml" in apply, apply
    assert apply.index("-namespace-") < apply.index("-networkpolicy-") < apply.index("-raycluster-")


def test_the_troubleshooting_page_quotes_the_pinned_efa_plugin(repo_root):
    pin = config.load(repo_root / "env.yaml", environ={}, target="aws").versions.efa_device_plugin_version
    quoted = re.findall(r"\(tutorial, (v[\d.]+)\)", (repo_root / "docs" / "troubleshooting.md").read_text())
    assert quoted and set(quoted) == {pin}, (quoted, pin)


def test_01s_form_says_what_zero_means_as_the_settings_do():
    from raytrain_helpers.core.settings_train import TrainSettings

    assert "0 = auto" in TrainSettings.model_fields["learning_rate"].description
    assert "0 = every GPU" in TrainSettings.model_fields["num_workers"].description
    text = " ".join(_text("01_capacity").split())
    assert "`learning_rate 0.0` means auto" in text and "`num_workers 0` means one worker per GPU" in text


def test_the_readme_and_01_say_plainly_what_has_run_on_aws(repo_root):
    line = "**What has been run on AWS: nothing.**"
    assert line in (repo_root / "README.md").read_text() and line in _text("01_capacity")


def test_07s_agreement_threshold_is_called_the_projects_own():
    assert "a threshold of its own choosing, not a published one" in " ".join(_text("07_benchmark").split())
