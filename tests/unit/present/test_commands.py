"""The commands shown beside each step, as a shell reads them back: the wrapped text is the same command."""

from __future__ import annotations

import json
import shlex

import pytest

from raytrain_helpers import present
from raytrain_helpers.core import config


def _json_normal(argv):
    return [json.loads(w) if w[:1] in "{[" else w for w in argv]


def _continued(lines: list[str]) -> str:
    """The lines as one command, as a POSIX shell joins them: a backslash-newline outside quotes is removed; inside
    single quotes both characters stay in the value."""
    text, out, quoted = "\n".join(lines), [], False
    i = 0
    while i < len(text):
        if text[i] == "'":
            quoted = not quoted
        if not quoted and text.startswith("\\\n", i):
            i += 2
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _blocks(text: str) -> list[list[str]]:
    """The lines of each command in the shown text (each follows its ``# purpose`` line)."""
    blocks: list[list[str]] = []
    for line in text.splitlines()[1:]:
        if line.startswith("# ---"):
            continue
        if line.startswith("#"):
            blocks.append([])
        else:
            blocks[-1].append(line)
    return blocks


@pytest.mark.parametrize("step", ["cluster", "teardown", "train", "benchmark"])
def test_a_wrapped_command_reads_back_as_the_same_argv(step, clean_env, repo_root):
    """Continuations end a line outside quotes only; a JSON argument too long for a line breaks inside its quotes,
    where the newline is part of the value and JSON reads it as a space."""
    s = config.load(repo_root / "env.yaml", environ={}, target="aws", check_installed_ray=False)
    shown = present.equivalent_commands(step, s)
    blocks = _blocks(shown.text)
    assert len(blocks) == len(shown.commands)
    for lines, (_, command) in zip(blocks, shown.commands, strict=True):
        assert max(len(line) for line in lines) <= present.MAX_WIDTH, command
        read_back = shlex.split(_continued(lines))
        assert _json_normal(read_back) == _json_normal(shlex.split(command)), command
    if step == "cluster":  # the lifecycle rule is too long for one line: it breaks inside its quotes
        inside = [line for lines in blocks for line in lines[:-1] if line.count("'") % 2 == 1]
        assert inside and not any(line.endswith("\\") for line in inside), inside


def test_the_local_target_shows_the_aws_commands_first_then_its_own(clean_env, repo_root):
    s = config.load(repo_root / "env.yaml", environ={}, target="local", check_installed_ray=False)

    def labels(settings, step="cluster"):
        text = present.equivalent_commands(step, settings).text
        return [line for line in text.splitlines() if line.startswith("# ---")]

    assert labels(s) == ["# --- on aws", "# --- on this machine"]
    assert labels(config.with_overrides(s, target="aws")) == ["# --- on aws"]
    assert labels(s, "verify") == ["# --- on aws"]  # 06's checks are the aws path's alone
