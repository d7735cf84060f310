"""05's code exercises, run as a learner pastes them into a cell: each ``# Exercise N`` block of the notebook's text
source, executed with ``rt`` imported, shows the effect its text tells the learner to observe (one CPU rank, one
training step of the lab model under PyTorch's FSDP memory tracker)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import raytrain_helpers as rt

pytest.importorskip("torch")
SOURCE = Path(__file__).resolve().parents[3] / "notebooks" / "src" / "05_train.md"


def exercise_blocks() -> dict[str, str]:
    """``{"Exercise 4: shard only the root": code}`` for every python block of 05 that starts ``# Exercise``."""
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", SOURCE.read_text(), flags=re.M | re.S)
    out = {}
    for indent, code in blocks:
        code = "\n".join(line[len(indent) :] for line in code.splitlines())
        first = code.splitlines()[0]
        if first.startswith("# Exercise"):
            out[first[2:]] = code
    return out


def run_cell(code: str):
    """Execute a cell as Jupyter does: the statements, then the value of the last expression."""
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    ns = {"rt": rt}
    exec(compile(tree, "<cell>", "exec"), ns)  # noqa: S102 - the notebook's own exercise code
    return eval(compile(ast.Expression(last.value), "<cell>", "eval"), ns) if last else None  # noqa: S307


def rows(shown) -> dict[str, list[float]]:
    """The table's rows: kind -> MiB per column (the job's first)."""
    out = {}
    for line in shown.text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and re.fullmatch(r"[\d.]+", cells[1]):
            out[cells[0]] = [float(c) for c in cells[1:]]
    return out


def test_the_notebook_has_the_two_code_exercises():
    assert sorted(exercise_blocks()) == ["Exercise 4: shard only the root", "Exercise 5: activation checkpointing"]


def test_root_only_sharding_holds_the_whole_models_weights_at_the_peak():
    table = rows(run_cell(exercise_blocks()["Exercise 4: shard only the root"]))
    job, root_only = zip(*[table[k] for k in ("full weights (gathered)", "sharded weights")], strict=True)
    assert root_only[0] > 5 * job[0], table  # gathered: the whole model against the root alone
    assert root_only[1] == job[1], table  # still sharded: the weights (and the optimizer state with them)
    assert table["peak (all kinds)"][1] > table["peak (all kinds)"][0], table


def test_activation_checkpointing_frees_the_activations():
    table = rows(run_cell(exercise_blocks()["Exercise 5: activation checkpointing"]))
    assert table["activations"][1] < table["activations"][0] / 10, table
    assert table["peak (all kinds)"][1] < table["peak (all kinds)"][0] / 2, table


def test_the_timeline_of_one_step_runs_forward_in_order_backward_in_reverse():
    """memory_lab.timeline: the points 05's memory picture stacks, from a real step of the lab model."""
    from raytrain_helpers.worker import memory_lab
    from raytrain_helpers.worker.model import shard_model

    points = memory_lab.timeline(shard_model, seq_len=64)
    names = [(p["phase"], p["module"], p["point"]) for p in points]
    layers = [f"layers.{i}" for i in range(memory_lab.LAB_MODEL["num_hidden_layers"])]
    assert names[0] == ("forward", "root", "gathered") and names[-1] == ("optimizer", "all", "after AdamW")
    assert [m for ph, m, pt in names if ph == "forward" and pt == "gathered"][1:] == layers
    assert [m for ph, m, pt in names if ph == "backward" and pt == "reduced"][:-1] == layers[::-1]
    full = "full weights (gathered)"
    gathered = [p["bytes"][full] for p in points if p["module"] == "layers.0"]
    assert gathered[0] > gathered[1], "a layer's full weights are freed after its forward"
    after = points[-1]["bytes"]
    # AdamW: two moments per weight, and a scalar step count per parameter tensor
    assert 0 <= after["optimizer state"] - 2 * after["sharded weights"] < 1024, after
