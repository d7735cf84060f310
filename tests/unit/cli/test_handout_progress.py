"""A facilitator's view of a local room, from what the attendees' runs really recorded: one attendee runs through
``raytrain-tutorial run``, the other through papermill with the output outside their folder (nothing saved in it).

Real notebook runs, kept to the cheap ones: 01 (capacity, no cluster) for both, and 06 for the papermill attendee
with no job trained (its verdict: the job row fails). Each kernel writes ``runs/<run>/progress.json`` and 06 writes
``runs/<run>/verify.json`` themselves (:mod:`raytrain_helpers.steps.progress`); nothing here writes a record."""

from __future__ import annotations

from pathlib import Path

import papermill
import pytest

from raytrain_helpers.cli import main
from raytrain_helpers.steps.progress import PROGRESS_FILE, VERDICT_FILE

REPO = Path(__file__).resolve().parents[3]
ENV = str(REPO / "env.yaml")


def _rows(text: str) -> dict[str, list[str]]:
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    return {ln.split("|")[2].strip(): [c.strip() for c in ln.split("|")[1:-1]] for ln in lines}


@pytest.mark.timeout(600)
def test_status_and_report_follow_a_cli_run_and_an_unsaved_papermill_run(tmp_path, clean_env, capsys, monkeypatch):
    (tmp_path / "roster.csv").write_text("name\nAnn\nBob\n")
    out = tmp_path / "ws"
    args = ["handout", "--roster", str(tmp_path / "roster.csv"), "--out", str(out), "--env-file", ENV]
    assert main([*args, "--host", "cpus=8,memory_gib=64,disk_gib=100"]) == 0
    said = capsys.readouterr().out
    assert "one host for 2 attendee(s)" in said and "USD" not in said and "EKS" not in said
    assert not (out / "facilitator").exists() and not (out / "workshop-cost.txt").exists()

    monkeypatch.chdir(out / "ann")  # Ann: the CLI, from her folder
    assert main(["run", "--only", "01"]) == 0
    bob = out / "bob"  # Bob: papermill, the executed copies outside his folder
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for nb in ("01", "06"):
        src = next((bob / "notebooks").glob(f"{nb}_*.ipynb"))
        try:
            papermill.execute_notebook(str(src), str(elsewhere / src.name), cwd=str(bob), progress_bar=False)
        except papermill.PapermillExecutionError:
            pass  # 06 may stop at a later cell without a job: the verdict is recorded before
    assert not list((bob / "runs" / "bob").glob("notebooks/*.ipynb")), "Bob saved nothing into his folder"
    assert (bob / "runs" / "bob" / PROGRESS_FILE).is_file() and (bob / "runs" / "bob" / VERDICT_FILE).is_file()

    capsys.readouterr()
    assert main(["handout", "status", str(out)]) == 0
    rows = _rows(capsys.readouterr().out)
    assert rows["name"][2:7] == ["last notebook", "last failure", "last job", "06 verdict", "last activity"]
    assert rows["Ann"][2:6] == ["01", "-", "-", "-"] and rows["Ann"][6].endswith("ago")
    assert rows["Bob"][2] == "06" and rows["Bob"][5].startswith("failed: job recorded by 05_train"), rows["Bob"]

    assert main(["handout", "report", str(out)]) == 0
    html = (out / "workshop-report.html").read_text()
    ann, bob_part = html.split("Bob (")[0].split("Ann (")[-1], html.split("Bob (")[-1]
    assert "runs/ann/notebooks/01_capacity.ipynb" in ann and "capacity on this machine" in ann
    assert "No notebook run yet." in bob_part and "06's verification" in bob_part and "&lt;" not in bob_part
    assert "<td>job recorded by 05_train</td>" in bob_part and "<td>FAIL</td>" in bob_part


def test_a_local_room_the_host_cannot_hold_is_refused_with_the_numbers(tmp_path, clean_env, capsys):
    (tmp_path / "roster.csv").write_text("name\nAnn\nBob\nCy\n")
    out = tmp_path / "ws"
    args = ["handout", "--roster", str(tmp_path / "roster.csv"), "--out", str(out), "--env-file", ENV]
    assert main([*args, "--host", "cpus=5,memory_gib=64,disk_gib=100"]) == 2
    err = capsys.readouterr().err
    assert "nothing was written" in err and "CPU cores: the 3 attendees' clusters take 6.0 (2, 2, 2)" in err, err
    assert "the host has 5.0" in err and not out.exists()
    assert main([*args, "--host", "cpus=6,memory_gib=64,disk_gib=100"]) == 0
    host = (out / "workshop-host.txt").read_text()
    assert "CPU cores: 6.0 needed, host has 6.0" in host and "6400, 6410, 6420" in host
    assert main([*args, "--out", str(tmp_path / "x"), "--host", "memory=3"]) == 2
    assert "--host 'memory=3'" in capsys.readouterr().err
