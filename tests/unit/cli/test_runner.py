"""raytrain-tutorial run / down: order, stop at the first failure, resume, skip what is done (real papermill)."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from raytrain_helpers.cli import run as run_cli
from raytrain_helpers.cli import runner
from raytrain_helpers.core import config
from raytrain_helpers.targets import for_settings


def _nb(path, body):
    nb = new_notebook(
        cells=[
            new_code_cell(
                "run_name = None\ntarget = None\nenv_file = None\nflavour = 'a'", metadata={"tags": ["parameters"]}
            ),
            new_code_cell(body),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture
def fake_notebooks(tmp_path, monkeypatch, clean_env):
    d = tmp_path / "nbs"
    d.mkdir()
    counts = tmp_path / "counts"
    counts.mkdir()
    fail = tmp_path / "fail"
    body = (
        "from pathlib import Path\np = Path({c!r}) / '{n}'\np.write_text(str(int(p.read_text()) + 1 "
        "if p.exists() else 1))\n"
    )
    for name in ("01_one", "02_cluster", "03_flaky", "04_last"):
        extra = f"assert not Path({str(fail)!r}).exists(), 'flaky step failed'\n" if name == "03_flaky" else ""
        _nb(d / f"{name}.ipynb", body.format(c=str(counts), n=name) + extra)
    monkeypatch.setenv("RAYTRAIN_NOTEBOOKS_DIR", str(d))
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
    return counts, fail, tmp_path


def _counts(counts):
    return {p.name: int(p.read_text()) for p in sorted(counts.iterdir())}


def test_stop_resume_and_skip(fake_notebooks, repo_root):
    counts, fail, tmp = fake_notebooks
    s = config.load(repo_root / "env.yaml", environ={}, run_name="runner-test")
    fail.write_text("x")
    res = runner.run_notebooks(s, params={}, env_file=None, files=[])
    assert [r.status for r in res] == ["ok", "ok", "failed", "not run"]
    assert "flaky step failed" in res[2].detail
    assert _counts(counts) == {"01_one": 1, "02_cluster": 1, "03_flaky": 1}

    fail.unlink()
    res = runner.run_notebooks(s, params={}, env_file=None, files=[])
    assert [r.status for r in res] == ["skipped", "ok", "ok", "ok"]  # 02 (cluster) is re-run before resuming
    assert _counts(counts) == {"01_one": 1, "02_cluster": 2, "03_flaky": 2, "04_last": 1}

    res = runner.run_notebooks(s, params={}, env_file=None, files=[])
    assert [r.status for r in res] == ["skipped"] * 4

    res = runner.run_notebooks(s, params={"flavour": "b"}, env_file=None, files=[])  # new parameters: redo all
    assert [r.status for r in res] == ["ok"] * 4
    state = json.loads((tmp / "runs" / "runner-test" / "run_state.json").read_text())
    assert state["params"]["flavour"] == "b" and state["steps"]["04_last"]["status"] == "ok"
    executed = nbformat.read(tmp / "runs" / "runner-test" / "notebooks" / "04_last.ipynb", as_version=4)
    assert 'flavour = "b"' in "".join(c.source for c in executed.cells)


def test_unknown_notebook_selector(fake_notebooks, repo_root):
    s = config.load(repo_root / "env.yaml", environ={}, run_name="runner-test2")
    with pytest.raises(config.ConfigError, match="no notebook matches '09'"):
        runner.run_notebooks(s, params={}, env_file=None, files=[], only=["09"])


NAMES = ["01_one", "02_cluster", "03_flaky", "04_last"]


@pytest.mark.parametrize(
    "done, only, start_from, selected, to_run",
    [
        (set(), None, None, NAMES, NAMES),
        (set(NAMES), None, None, NAMES, []),
        ({"01_one", "02_cluster"}, None, None, NAMES, ["02_cluster", "03_flaky", "04_last"]),  # cluster step again
        ({"01_one"}, None, None, NAMES, ["02_cluster", "03_flaky", "04_last"]),
        ({"02_cluster", "04_last"}, None, None, NAMES, NAMES),  # resumes at the first
        (set(NAMES), ["03", "01"], None, ["01_one", "03_flaky"], ["01_one", "03_flaky"]),
        (set(NAMES), None, "03", ["03_flaky", "04_last"], ["03_flaky", "04_last"]),
        (set(), ["01", "02", "04"], "02", ["02_cluster", "04_last"], ["02_cluster", "04_last"]),
    ],
)
def test_select_steps(done, only, start_from, selected, to_run):
    assert runner.select_steps(NAMES, done, only, start_from) == (selected, set(to_run))


def test_notebook_params_carry_the_settings_files(tmp_path, repo_root, clean_env):
    s = config.load(repo_root / "env.yaml", environ={}, run_name="p", target="aws")
    over = tmp_path / "over.yaml"
    p = runner.notebook_params(s, {"steps": 3}, None, [str(over)])
    assert p == {
        "steps": 3,
        "run_name": "p",
        "target": "aws",
        "env_file": str(repo_root / "env.yaml"),
        "override_files": [str(over.resolve())],
    }
    assert runner.notebook_params(s, {}, str(tmp_path / "e.yaml"), [])["env_file"] == str(tmp_path / "e.yaml")


def _cli(*argv):
    parser = argparse.ArgumentParser()
    run_cli.register(parser.add_subparsers())
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_run_command_types_parameters_and_lists(fake_notebooks, repo_root, capsys):
    counts, _, tmp = fake_notebooks
    env = str(repo_root / "env.yaml")
    assert _cli("run", "--env-file", env, "--run-name", "cli-test", "-p", "steps", "3", "--only", "01") == 0
    assert _counts(counts) == {"01_one": 1}
    state = json.loads((tmp / "runs" / "cli-test" / "run_state.json").read_text())
    assert state["params"]["steps"] == 3 and state["params"]["run_name"] == "cli-test"
    assert "all notebooks succeeded" in capsys.readouterr().out
    assert _cli("run", "--env-file", env, "--list") == 0
    assert "01_one: run_name=None, target=None, env_file=None, flavour='a'" in capsys.readouterr().out


def test_run_command_fails_on_a_failing_notebook(fake_notebooks, repo_root, capsys):
    counts, fail, _ = fake_notebooks
    fail.write_text("x")
    assert _cli("run", "--env-file", str(repo_root / "env.yaml"), "--run-name", "cli-fail", "--from", "02") == 1
    assert "FAILED at 03_flaky" in capsys.readouterr().out
    assert _counts(counts) == {"02_cluster": 1, "03_flaky": 1}


@pytest.mark.parametrize("argv, ok, assume_yes", [(["down"], True, False), (["down", "--yes"], False, True)])
def test_down_command_tears_down(monkeypatch, repo_root, clean_env, argv, ok, assume_yes):
    calls = []

    class Result:
        def __init__(self):
            self.ok = ok

        def show(self):
            calls.append("shown")

    def teardown(settings, *, assume_yes):
        calls.append((for_settings(settings).NAME, assume_yes))
        return Result()

    monkeypatch.setattr(run_cli.teardown, "run", teardown)
    assert _cli(*argv, "--env-file", str(repo_root / "env.yaml"), "--target", "aws") == (0 if ok else 1)
    assert calls == [("aws", assume_yes), "shown"]


def test_kernels_talk_over_unix_sockets_removed_after_each_notebook(tmp_path, monkeypatch, clean_env, repo_root, capfd):
    """papermill's kernels listen on Unix sockets in a private temporary folder, not on TCP ports of 127.0.0.1:
    ipykernel's plain-text TCP warning is not printed, and the folder is gone afterwards."""
    d, seen = tmp_path / "nbs", tmp_path / "seen.json"
    d.mkdir()
    cell = "import json\nfrom ipykernel.kernelapp import IPKernelApp\napp = IPKernelApp.instance()\n"
    _nb(d / "01_one.ipynb", cell + f"open({str(seen)!r}, 'w').write(json.dumps([app.transport, app.ip]))")
    monkeypatch.setenv("RAYTRAIN_NOTEBOOKS_DIR", str(d))
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
    s = config.load(repo_root / "env.yaml", environ={}, run_name="ipc-test")
    assert [r.status for r in runner.run_notebooks(s, params={}, env_file=None, files=[])] == ["ok"]
    transport, ip = json.loads(seen.read_text())
    folder = Path(ip).parent
    assert transport == "ipc" and folder.name.startswith("raytrain-kernel-"), (transport, ip)
    assert folder.parent == Path(tempfile.gettempdir()) and not folder.exists(), "the sockets' folder was left"
    assert "without encryption" not in capfd.readouterr().err


def test_kernels_keep_tcp_where_the_socket_folder_is_too_deep():
    """A Unix socket's path is limited (108 bytes on Linux, with the NUL): under a long TMPDIR the kernels keep
    TCP rather than fail to start ("File name too long")."""
    assert runner.kernel_over_unix_sockets("/tmp/raytrain-kernel-x").KernelManager.transport == "ipc"
    deep = "/tmp/" + "d" * 80 + "/raytrain-kernel-x"
    assert "KernelManager" not in runner.kernel_over_unix_sockets(deep)


def test_an_interrupted_notebook_says_what_runs_on_and_what_to_do(fake_notebooks, repo_root, monkeypatch, capsys):
    """Ctrl-C during a notebook (papermill's call interrupted): the runner says that a submitted job runs on and that
    the same command picks up there, then lets the interrupt end the command (the CLI exits 130)."""
    import papermill as pm

    s = config.load(repo_root / "env.yaml", environ={}, run_name="runner-interrupted")

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(pm, "execute_notebook", interrupted)
    with pytest.raises(KeyboardInterrupt):
        runner.run_notebooks(s, params={}, env_file=None, files=[])
    err = capsys.readouterr().err
    assert "interrupted during 01_one" in err and "Run the same command again: it starts again at 01_one" in err
