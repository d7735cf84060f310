"""How commands take settings: a command's own flag (``--target``, ``--run-name``) and a ``-p`` of the same setting
that disagree are an error naming both, through the real command line; agreeing ones are fine."""

from __future__ import annotations

import pytest

from raytrain_helpers import cli
from raytrain_helpers.cli.args import settings_from_args, with_flags
from raytrain_helpers.core.validation import ConfigError


def parse(*argv: str):
    return cli.build_parser().parse_args(list(argv))


@pytest.mark.parametrize("given", ["target", "TARGET"])
def test_target_flag_and_a_different_p_target_is_an_error_naming_both(clean_env, given, capsys):
    assert cli.main(["run", "--list", "--target", "aws", "-p", given, "local"]) == 2
    err = capsys.readouterr().err
    assert "--target aws" in err and f"-p {given} local" in err and "not both" in err


def test_settings_commands_refuse_the_conflict_too(clean_env):
    with pytest.raises(ConfigError, match=r"--target local and -p target aws"):
        settings_from_args(parse("config", "--target", "local", "-p", "target", "aws"))


def test_run_name_flag_and_p_run_name_conflict(clean_env):
    args = parse("run", "--run-name", "a", "-p", "run_name", "b")
    with pytest.raises(ConfigError, match=r"--run-name a and -p run_name b"):
        with_flags(args, {"run_name": "b"}, run_name="a")


def test_the_same_value_twice_and_a_flag_alone_are_fine(clean_env):
    assert settings_from_args(parse("config", "--target", "local", "-p", "target", "local")).target == "local"
    assert settings_from_args(parse("config", "--target", "local")).target == "local"


def test_an_unknown_target_beside_the_flag_is_never_silently_replaced(clean_env, capsys):
    assert cli.main(["run", "--list", "--target", "aws", "-p", "target", "gcp"]) == 2
    err = capsys.readouterr().err
    assert "gcp" in err and "target" in err
