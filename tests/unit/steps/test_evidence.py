"""The evidence kept in the run's folder: saved as read, read back whole, audited with the cluster gone, and 07's
runs rebuilt from it."""

from __future__ import annotations

import json

import pytest

from raytrain_helpers import cli
from raytrain_helpers.clients.rayjobs import JobRun
from raytrain_helpers.core import config
from raytrain_helpers.steps import benchmark, evidence
from tests.unit.nccl.fixtures import NVLINK, SOCKET, split_by_process


@pytest.fixture
def settings(clean_env, repo_root, tmp_path, monkeypatch):
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
    return config.load(repo_root / "env.yaml", environ={}, run_name="ev", check_installed_ray=False)


def _job(world: int = 2, tokens: float = 100.0) -> JobRun:
    ranks = [
        dict(
            rank=r,
            node_id=f"n{r}" * 8,
            device="cuda:0",
            tokens_per_s=tokens,
            mean_step_time_s=0.5,
            peak_mem_bytes=2**30,
        )
        for r in range(world)
    ]
    logs = "".join(f"(RayTrainWorker pid={r}) [train] SUCCESS rank={r}/{world}\n" for r in range(world))
    result = dict(ok=True, marker="abc", metrics=dict(world_size=world, ranks=ranks, steps=4, step=4))
    return JobRun("raytrain-ev-abc", "SUCCEEDED", logs=logs, result=result, config=dict(run_name="ev", marker="abc"))


def _worker_logs(text: str) -> dict[str, str]:
    """The 2-rank log as two Ray worker files of two raylets, as a target's ``worker_logs`` names them."""
    parts = list(split_by_process(text).values())
    return {f"/tmp/r/worker-{i}/session_latest/logs/worker-{i}abc-01-{i}.out": t for i, t in enumerate(parts)}


def test_a_saved_reading_reads_back_whole(settings):
    logs = _worker_logs(NVLINK.read_text())
    d = evidence.save(settings, "train", logs, job=_job(), expected="p2p", infra=[["GPUs", None, "n/a"]])
    assert d == evidence.folder(settings, "train") and evidence.kinds(settings) == ["train"]
    ev = evidence.load(d)
    assert ev.logs == logs, "every worker file comes back under the source it was read from"
    assert ev.expected == "p2p" and ev.manifest["infra"] == [["GPUs", None, "n/a"]]
    assert ev.job.ranks == _job().ranks and ev.success() == ({0, 1}, 2)
    again = evidence.save(settings, "train", {"/x/worker-9-9.out": "one"}, job=_job())
    assert evidence.load(again).logs == {"/x/worker-9-9.out": "one"}, "a second reading replaces the first whole"
    assert [f.name for f in (again / "workers").rglob("worker-*")] == ["worker-9-9.out"], "no file of the first left"


def test_a_folder_without_manifest_is_refused_with_the_fix(tmp_path):
    with pytest.raises(OSError, match="evidence.json.*Fix"):
        evidence.load(tmp_path)
    with pytest.raises(ValueError, match="kind"):
        evidence.folder(None, "../up")


def test_audit_reproduces_the_verdict_and_the_rank_count_from_a_saved_reading(settings, capsys):
    good = evidence.save(settings, "train", _worker_logs(NVLINK.read_text()), job=_job(), expected="p2p")
    assert cli.main(["audit", str(good)]) == 0
    out = capsys.readouterr().out
    assert "NCCL transport audit: PASS" in out and "ranks: 2/2 printed SUCCESS, 2/2 summaries" in out, out
    assert "NCCL world communicator: 2 ranks; the job: 2 ranks" in out
    bad = evidence.save(settings, "bench-socket", _worker_logs(SOCKET.read_text()), job=_job(), expected="p2p")
    assert cli.main(["audit", str(bad), "--json"]) == 1, "pairs on sockets where P2P was expected"
    doc = json.loads(capsys.readouterr().out)
    assert doc["transport"]["ok"] is False and doc["world_size"] == 2 and doc["nccl_world_size"] == 2


def test_audit_of_a_cpu_run_says_not_applicable_and_fails_a_missing_rank(settings, capsys):
    d = evidence.save(settings, "train", {}, job=_job(), expected="none")
    assert cli.main(["audit", str(d)]) == 0
    assert "transport: n/a: CPU run, gloo" in capsys.readouterr().out
    short = _job()
    short.logs = short.logs.splitlines()[0] + "\n"  # rank 1 never printed SUCCESS
    d = evidence.save(settings, "train", {}, job=short, expected="none")
    assert cli.main(["audit", str(d)]) == 1
    assert "ranks: 1/2 printed SUCCESS" in capsys.readouterr().out


def test_the_benchmark_runs_are_rebuilt_from_the_run_folder(settings):
    fast, slow = _job(tokens=300.0), _job(tokens=100.0)
    efa = dict(before={"n": {"rdmap0/1/tx_bytes": 0}}, after={"n": {"rdmap0/1/tx_bytes": 2**30}}, verdict=None)
    benchmark.save_variant(
        settings, dict(label="p2p", expect="p2p", env={}), fast, _worker_logs(NVLINK.read_text()), efa
    )
    benchmark.save_variant(settings, dict(label="socket", expect="socket", env={"NCCL_P2P_DISABLE": "1"}), slow, {}, {})
    bench = benchmark.from_evidence(settings)
    assert [b.label for b in bench] == ["p2p", "socket"]
    assert [b.tokens_per_s_per_gpu for b in bench] == [300.0, 100.0]
    assert bench[1].env == {"NCCL_P2P_DISABLE": "1"} and "NCCL INFO" in bench[0].log_text
    assert benchmark.figures(bench)[0]["step_s"] == 0.5


def test_08_collects_what_the_run_folder_lacks_before_the_teardown(settings, monkeypatch):
    from raytrain_helpers.steps import teardown, train
    from raytrain_helpers.targets import local

    train._save(settings, _job(), "ev")
    bench = _job(tokens=50.0)
    bench.config = dict(run_name="ev-bench-gloo-a1b2c3", marker="b1")
    train._save(settings, bench, "ev-bench-gloo-a1b2c3")
    logs = _worker_logs(NVLINK.read_text())
    monkeypatch.setattr(local, "worker_logs", lambda s, marker: logs)
    monkeypatch.setattr(local, "benchmark_variants", lambda s: [dict(label="gloo", expect="none", env={})])
    rows = dict(teardown.collect_missing(settings))
    assert rows["train"].startswith("saved now") and rows["bench-gloo"].startswith("saved now"), rows
    saved = evidence.saved(settings, "train")
    assert saved.logs == logs and saved.manifest["status_now"][0] is None, "the cluster here answers no status"
    assert evidence.saved(settings, "bench-gloo").job.ranks[0]["tokens_per_s"] == 50.0
    assert dict(teardown.collect_missing(settings))["train"] == "already saved (06)", "a second 08 reads nothing"


def test_08_says_what_it_could_not_collect_and_goes_on(settings, monkeypatch):
    from raytrain_helpers.steps import teardown, train
    from raytrain_helpers.targets import local

    train._save(settings, _job(), "ev")

    def unreachable(s, marker):
        raise RuntimeError("pods/exec forbidden")

    monkeypatch.setattr(local, "worker_logs", unreachable)
    monkeypatch.setattr(local, "infra_criteria", lambda s: (_ for _ in ()).throw(RuntimeError("API down")))
    rows = dict(teardown.collect_missing(settings))
    assert rows["train"].startswith("NOT saved: RuntimeError: API down"), rows
