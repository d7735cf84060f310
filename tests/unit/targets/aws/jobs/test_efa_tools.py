"""06's ``fi_info`` command, run by a real ``/bin/sh``: found on PATH, else in the EFA installer's folder (which
``kubectl exec`` does not put on PATH), else an ordinary exit 127 naming it."""

from __future__ import annotations

import os
import stat
import subprocess

from raytrain_helpers.targets.aws.jobs import efa_tools

EFA_OUT = "provider: efa\n    fabric: efa\n    domain: rdmap0s0-rdm\n    type: FI_EP_RDM\n"


def _tool(folder, text: str):
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / "fi_info"
    f.write_text(f"#!/bin/sh\nprintf '%s' '{text}'\necho \"args: $*\" >&2\n")
    f.chmod(f.stat().st_mode | stat.S_IXUSR)


def _run(argv, path: str):
    env = {k: v for k, v in os.environ.items() if k != "PATH"} | {"PATH": path}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=10)


def test_fi_info_is_found_in_the_efa_folder_when_it_is_not_on_path(tmp_path):
    efa = tmp_path / "opt-amazon-efa-bin"
    _tool(efa, EFA_OUT)
    done = _run(efa_tools.fi_info_command(efa_bin=str(efa)), "/usr/bin:/bin")
    assert done.returncode == 0 and done.stdout == EFA_OUT and "args: -p efa" in done.stderr


def test_fi_info_on_path_comes_first(tmp_path):
    _tool(tmp_path / "efa", "from the EFA folder")
    _tool(tmp_path / "on-path", "from PATH")
    done = _run(efa_tools.fi_info_command(efa_bin=str(tmp_path / "efa")), f"{tmp_path / 'on-path'}:/usr/bin:/bin")
    assert done.stdout == "from PATH"


def test_no_fi_info_anywhere_is_exit_127_naming_it(tmp_path):
    done = _run(efa_tools.fi_info_command(efa_bin=str(tmp_path / "absent")), "/usr/bin:/bin")
    assert done.returncode == 127 and "fi_info" in done.stderr and "not found" in done.stderr


def test_the_default_folder_is_the_efa_installers():
    assert efa_tools.EFA_BIN == "/opt/amazon/efa/bin"
    assert efa_tools.fi_info_command()[:2] == ["/bin/sh", "-c"]
    assert ":/opt/amazon/efa/bin" in efa_tools.fi_info_command()[2]
