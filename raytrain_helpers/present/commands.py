"""The commands a step stands for (aws, eksctl, helm, kubectl, ray), with the settings' values:
:func:`equivalent_commands`. The commands themselves are each target's (``targets.aws.commands``,
``targets.local.commands``); here they are laid out to read.
"""

from __future__ import annotations

import re
import shlex

from ..core import config
from ..core.config import Settings
from ..core.tables import MAX_WIDTH
from ..targets import for_settings
from ..targets.base import COMMAND_STEPS
from .shown import Shown, pre_html

#: The steps :func:`equivalent_commands` knows.
STEP_COMMANDS = COMMAND_STEPS


def target_name(settings: Settings) -> str:
    """``local`` or ``aws``: the name of the target these settings run on."""
    return for_settings(settings).NAME


def equivalent_commands(step: str, settings: Settings) -> Shown:
    """The commands a step stands for, with these settings' values: optional, for reading or typing yourself.

    ``step``: capacity, cluster, plugins, kuberay, train, verify, benchmark or teardown. Each target says its own
    (``Target.equivalent_commands``); a target that stands in for another (local for aws) shows that one's first,
    then its own. ``.commands`` holds them as (purpose, command) pairs.
    """
    if step not in STEP_COMMANDS:
        raise ValueError(f"unknown step {step!r}. Fix: one of {', '.join(STEP_COMMANDS)}")
    target = for_settings(settings)
    groups, own_label = [], f"on {target.NAME}"
    if target.STANDS_IN_FOR:
        other = config.with_overrides(settings, target=target.STANDS_IN_FOR)
        groups.append((f"on {target.STANDS_IN_FOR}", for_settings(other).equivalent_commands(other, step)))
        own_label = "on this machine"
    own = target.equivalent_commands(settings, step)
    if own:
        groups.append((own_label, own))
    lines = ["# Optional: what the step above does, as commands you could type yourself (your values)."]
    commands: list[tuple[str, str]] = []
    for label, pairs in groups:
        lines.append(f"# --- {label}")
        for purpose, command in pairs:
            lines.append(f"# {purpose}")
            lines += _wrap_command(command)
            commands.append((purpose, command))
    text = "\n".join(lines)
    shown = Shown(text, pre_html(text, lambda line: "#6a737d" if line.startswith("#") else None))
    shown.commands = commands
    return shown


def _wrap_command(command: str, width: int = MAX_WIDTH) -> list[str]:
    """A shell command over several lines (`` \\`` continuations), split between words only. A single-quoted JSON
    argument too long for a line breaks after one of its commas instead: the shell keeps that newline inside the
    quotes, and JSON reads it as a space (the same value)."""
    words = shlex.split(command, posix=False) if "'" not in command else _split_keep_quotes(command)
    lines, current = [], ""
    for word in words:
        pieces = re.split(r"(?<=,) ", word) if len(word) > width - 6 and re.match(r"'[\[{]", word) else [word]
        for i, piece in enumerate(pieces):
            candidate = f"{current} {piece}" if current else piece
            if len(candidate) > width - 2 and current:
                lines.append(current + ("" if i else " \\"))
                current = "    " + piece
            else:
                current = candidate
    lines.append(current)
    return lines


def _split_keep_quotes(command: str) -> list[str]:
    """Words of a command, single-quoted spans kept whole with their quotes."""
    words, current, quoted = [], "", False
    for char in command:
        if char == "'":
            quoted = not quoted
        if char == " " and not quoted:
            if current:
                words.append(current)
            current = ""
        else:
            current += char
    if current:
        words.append(current)
    return words
