"""The exercises as the notebooks word them: every setting an exercise passes (``-p NAME VALUE``) is one the
settings accept, every override file an exercise spells out loads, and the exercises that need no running cluster
are run here exactly as written (the command or the code block read from the text source), with what their
*Observe* says checked against what they print. Exercises that train (02, 03, 05, 07) need the local cluster; the
integration tests run the thirty-line example of 05 as worded (tests/integration/test_tiny_trainer.py)."""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import raytrain_helpers as rt
from raytrain_helpers.core.validation import ConfigError

REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "notebooks" / "src"
NAMES = sorted(p.stem for p in SOURCES.glob("[0-9][0-9]_*.md"))


def exercises(name: str) -> list[str]:
    """The chapter's exercises, each the text from its number to the next one (or the recap)."""
    text = (SOURCES / f"{name}.md").read_text()
    tail = text[text.index("## Exercises") : text.index("**Recap.**")]
    starts = [m.start() for m in re.finditer(r"^\d+\. \*\*", tail, re.M)]
    return [tail[a:b] for a, b in zip(starts, [*starts[1:], len(tail)], strict=True)]


def exercise(name: str, title: str) -> str:
    found = [e for e in exercises(name) if title in e.split("\n", 1)[0]]
    assert len(found) == 1, (name, title)
    return found[0]


def blocks(text: str, lang: str) -> list[str]:
    """Fenced blocks of one language in an exercise (indented under its list item), dedented."""
    out = []
    for m in re.finditer(rf"^( *)```{lang}\n(.*?)^\1```", text, re.S | re.M):
        indent = len(m.group(1))
        out.append("\n".join(line[indent:] for line in m.group(2).splitlines()) + "\n")
    return out


def parameters(text: str) -> list[tuple[str, str]]:
    return re.findall(r"-p ([a-z_]+) ([^\s`]+)", text)


def local(**params):
    return rt.load(REPO / "env.yaml", environ={}, target="local", **params)


@pytest.mark.parametrize("name", NAMES)
def test_every_parameter_an_exercise_passes_is_a_setting(name):
    """``-p NAME VALUE`` in an exercise names a setting, with a value the settings accept (run_name, a notebook
    parameter, is checked as a name only)."""
    seen = 0
    for text in exercises(name):
        params = dict(parameters(text))
        seen += len(params)
        settings_params = {k: v for k, v in params.items() if k not in ("prompts",)}
        target = "aws" if "--target aws" in text or "(aws" in text.split("\n", 1)[0] else "local"
        rt.load(REPO / "env.yaml", environ={}, target=target, **settings_params)
    if name in ("01_capacity", "05_train", "06_verify", "07_benchmark"):
        assert seen, f"{name}: no -p parameter found in its exercises: the pattern is stale"


def test_01_a_larger_model_counts_its_parameters_and_warns_a_laptop():
    """01's first exercise: the plan counts about 1.5 B parameters; on a machine with less memory than its CPU
    workers need, the capacity check refuses with the message the exercise quotes."""
    text = exercise("01_capacity", "The model decides the memory")
    (name, value), *_ = parameters(text)
    cfg = local(**{name: value})
    cap = rt.targets.for_settings(cfg).capacity(cfg)
    rows = dict(cap.plan.rows())
    assert any("1.5" in str(v) or "1,5" in str(v) for k, v in rows.items() if "param" in k.lower()), rows
    quoted = re.search(r"fails with `([^`]+)`", " ".join(text.split())).group(1)
    assert quoted == "GiB of memory needed"
    if cap.mem_available_gib < cap.required_mem_gib:
        assert any(quoted in p for p in cap.problems), cap.problems
    assert cap.required_mem_gib > 16, "the warning is for a laptop: the need is well above one"


def test_01_a_typo_in_the_instance_type_is_refused_with_the_quoted_message():
    text = " ".join(exercise("01_capacity", "Ask for an instance type").split())
    value = re.search(r"set `gpu_node_type` to `([^`]+)`", text).group(1)
    quoted = re.search(r"refused next to its field: `([^`]+)`", text).group(1)
    with pytest.raises(ConfigError, match=re.escape(quoted)):
        rt.load(REPO / "env.yaml", environ={}, target="aws", gpu_node_type=value)


def test_04_the_render_command_writes_what_the_exercise_observes(tmp_path):
    """04's first exercise, the command as written, in a fresh folder with the environment active."""
    text = exercise("04_kuberay", "The cluster follows the settings")
    command = re.search(r"`(raytrain-tutorial render [^`]+)`", " ".join(text.split())).group(1)
    count = int(dict(parameters(command))["gpu_node_count"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAYTRAIN_", "AWS_"))}
    env.update(PATH=os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]]), PYTHONPATH=str(REPO))
    env.update(AWS_ACCESS_KEY_ID="none", AWS_SECRET_ACCESS_KEY="none", AWS_EC2_METADATA_DISABLED="true")
    done = subprocess.run(shlex.split(command), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (rc_file,) = (tmp_path / "rendered").glob("*-raycluster-*.yaml")
    (group,) = yaml.safe_load(rc_file.read_text())["spec"]["workerGroupSpecs"]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == count
    shm = next(v for v in group["template"]["spec"]["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory" and shm["emptyDir"]["sizeLimit"]


def _run_block(code: str, namespace: dict):
    """Run a pasted cell: every statement, and the value of the last expression (what the notebook shows)."""
    tree = ast.parse(code)
    last = tree.body.pop() if isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<exercise>", "exec"), namespace)
    return eval(compile(ast.Expression(last.value), "<exercise>", "eval"), namespace) if last else None


def test_04_the_code_exercise_runs_as_pasted_and_the_checks_name_both_problems():
    text = exercise("04_kuberay", "Break the manifest in code")
    (code,) = blocks(text, "python")
    flat = " ".join(text.split())
    quoted = re.findall(r"`([^`]+)`", flat[flat.index("*Observe:*") :])
    for cfg in (local(), rt.load(REPO / "env.yaml", environ={}, target="aws")):
        problems = _run_block(code, {"rt": rt, "cfg": cfg})
        assert len(problems) == 2, problems
        for q in ("/dev/shm is not a memory-backed emptyDir", "FI_PROVIDER = None. Fix: FI_PROVIDER=efa"):
            assert q in quoted and any(q in p for p in problems), (q, problems)


def test_06_the_fallback_exercise_trains_with_the_override_and_verifies_without_it(tmp_path):
    """06's first exercise: its override file forces sockets and tells 05's check to expect them (so 05 trains);
    06 run without it expects the target's own transport again (so the audit fails the socket pairs). Its two
    commands name a new run (05 would otherwise find the default run complete) and pass the file only to 05."""
    text = exercise("06_verify", "Force the fallback")
    (override,) = blocks(text, "yaml")
    path = tmp_path / "socket.yaml"
    path.write_text(override)
    five, six = re.findall(r"`(raytrain-tutorial run --only 0[56][^`]*)`", " ".join(text.split()))
    assert "-f socket.yaml" in five and "-f" not in six
    assert dict(parameters(five))["run_name"] == dict(parameters(six))["run_name"] != "tutorial"
    for target in ("local", "aws"):
        with_file = rt.load(REPO / "env.yaml", environ={}, target=target, files=[path])
        assert with_file.nccl.env == {"NCCL_NET": "Socket"} and with_file.nccl.expect == "socket"
        plain = rt.load(REPO / "env.yaml", environ={}, target=target)
        assert rt.targets.for_settings(plain).expected_transport(plain, 1) != "socket"
        assert rt.targets.for_settings(with_file).expected_transport(with_file, 1) == "socket"


def test_every_aws_exercise_says_its_observation_is_expected_not_seen():
    """An exercise that needs AWS says that what it tells you to observe comes from the sources: this project has
    not run it on AWS."""
    checked = 0
    for name in NAMES:
        for text in exercises(name):
            title = text.split("\n", 1)[0]
            if "(aws" in title or "--target aws" in text and "read-only" in title:
                checked += 1
                assert "expected from the sources; not seen on AWS" in " ".join(text.split()), (name, title)
    assert checked >= 6


def test_06_a_run_that_never_happened_fails_the_row_the_exercise_names(tmp_path, monkeypatch):
    """06's last exercise, with its parameter as written: one FAIL row, the one it quotes, saying to run 05 first;
    the notebook's last cell (``raise_if_failed``) raises. Needs no cluster."""
    text = exercise("06_verify", "A run that never happened")
    params = dict(parameters(text))
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path))
    v = rt.steps.verify.run(local(**params))
    row = re.search(r"one FAIL row, `([^`]+)`", " ".join(text.split())).group(1)
    failed = v.criteria.failed
    assert [c.name for c in failed] == [row], [(c.name, c.evidence) for c in failed]
    assert "run 05_train first" in failed[0].evidence
    with pytest.raises(AssertionError):
        v.raise_if_failed()
