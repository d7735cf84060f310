"""raytrain-tutorial config: the resolved settings, ``--names`` and ``--markdown`` (the settings table of
``docs/settings.md``)."""

from __future__ import annotations

import argparse

import pytest

from raytrain_helpers.cli import config as config_cli
from raytrain_helpers.core import config

START = "<!-- settings-table:start"
END = "<!-- settings-table:end -->"


def run_config(capsys, *argv: str) -> str:
    parser = argparse.ArgumentParser()
    config_cli.register(parser.add_subparsers())
    args = parser.parse_args(["config", *argv])
    assert args.func(args) == 0
    return capsys.readouterr().out


def readme_block(readme: str) -> str:
    """What stands between the settings-table markers (the start marker's line excluded)."""
    start = readme.index(START)
    return readme[readme.index("\n", start) + 1 : readme.index(END)]


def test_names_lists_every_setting_with_type_default_and_meaning(capsys):
    out = run_config(capsys, "--names")
    lines = out.splitlines()
    for d in config.field_docs():
        head = next((i for i, line in enumerate(lines) if line.startswith(f"{d.flat} (")), None)
        assert head is not None, d.flat
        assert config.env_var_name(d.flat) in lines[head]
        assert lines[head].endswith(f": {d.type} = {config_cli.default_text(d.default)}"), lines[head]
        if d.env_sh:
            assert f"env.sh {d.env_sh}" in lines[head]
        meaning = []
        for line in lines[head + 1 :]:
            if not line.startswith("    "):
                break
            meaning.append(line.strip())
        assert " ".join(meaning) == d.description
    assert "steps (train.steps, env.sh STEPS, RAYTRAIN_STEPS): int = 80" in lines


def test_markdown_has_one_row_per_setting(capsys):
    out = run_config(capsys, "--markdown")
    rows = out.strip().splitlines()
    assert "\n".join(rows[:2]) == config_cli.MARKDOWN_HEADER
    assert len(rows) == 2 + len(config.FLAT_FIELDS)
    assert "| `local.gpus_per_worker_node` | `-1` | GPUs of each worker raylet: -1 = split" in out
    assert "| `train.steps` (STEPS) | `80` | Training steps (at least 1). |" in rows
    assert '| `aws.gpu_az` (GPU_AZ) | `""` |' in out


def test_markdown_escapes_pipes():
    doc = config.FieldDoc("x", "g.x", "", "str", "a|b", "one | two")
    assert config_cli.markdown_table([doc]).splitlines()[-1] == "| `g.x` | `a\\|b` | one \\| two |"


def test_docs_settings_table_is_the_generated_one(capsys, repo_root):
    readme = (repo_root / "docs" / "settings.md").read_text()
    assert readme_block(readme) == run_config(capsys, "--markdown"), (
        "docs/settings.md's settings table differs from the settings' docstrings. Fix: replace the block between the "
        "settings-table markers with the output of `raytrain-tutorial config --markdown`"
    )


def test_docs_check_notices_a_changed_docstring(capsys, repo_root, monkeypatch):
    info = config.TrainSettings.model_fields["steps"]
    monkeypatch.setattr(info, "description", "Training steps.")
    readme = (repo_root / "docs" / "settings.md").read_text()
    assert readme_block(readme) != run_config(capsys, "--markdown")


@pytest.mark.parametrize("value, text", [("", '""'), ("x", "x"), ([], "[]"), ({}, "{}"), (1e-4, "0.0001"), (-1, "-1")])
def test_default_text(value, text):
    assert config_cli.default_text(value) == text


def test_names_and_markdown_exclude_each_other(capsys):
    parser = argparse.ArgumentParser()
    config_cli.register(parser.add_subparsers())
    with pytest.raises(SystemExit):
        parser.parse_args(["config", "--names", "--markdown"])


def test_resolved_settings_and_their_sources(capsys, clean_env, repo_root):
    out = run_config(capsys, "--env-file", str(repo_root / "env.yaml"), "-p", "steps", "3")
    assert "  steps: 3\n" in out
    assert "#   train.steps: parameter (steps)" in out
