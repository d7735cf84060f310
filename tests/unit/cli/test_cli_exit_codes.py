"""The real command line on the local target, with the real result objects: each command exits 0 when it did what
it was asked, 1 when not. No cluster runs on the ports used here."""

from __future__ import annotations

import shutil
import tempfile

import pytest

from raytrain_helpers import cli
from tests.helpers import free_port


@pytest.fixture
def params(clean_env):
    root = tempfile.mkdtemp(prefix="rt-cli-", dir="/tmp")
    yield [
        *("-p", "gcs_port", str(free_port())),
        *("-p", "dashboard_port", str(free_port())),
        *("-p", "temp_root", f"{root}/c"),
        *("-p", "gpus_per_worker_node", "0"),
    ]
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["cluster", "plan"], 0, "would start a head"),
        (["cluster", "status"], 1, "not running"),  # status asks whether it runs, as on aws
        (["cluster", "down"], 0, "nothing was running"),
        (["status"], 0, "not running"),  # `raytrain-tutorial status` only reports
    ],
)
def test_exit_codes_of_the_real_cli(params, argv, code, says, capsys):
    assert cli.main([*argv, *params]) == code
    assert says in capsys.readouterr().out
