"""The local target's interface functions: which raylet action each cluster action runs, job defaults, variants."""

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.targets import local


@pytest.fixture
def settings(clean_env, repo_root):
    return config.load(repo_root / "env.yaml", environ={}, gpus_per_worker_node=0)


def test_cluster_actions_map_to_the_raylets(settings, monkeypatch):
    calls = []
    monkeypatch.setattr(local, "up", lambda s, plan=False: calls.append(("up", plan)))
    monkeypatch.setattr(local, "status", lambda s: calls.append(("status",)))
    monkeypatch.setattr(local, "down", lambda s: calls.append(("down",)))
    for action in ("plan", "up", "status", "down", None):
        local.cluster(settings, action)
    assert calls == [("up", True), ("up", False), ("status",), ("down",), ("up", False)]
    with pytest.raises(ValueError, match="unknown action"):
        local.cluster(settings, "explode")


def test_job_defaults_on_cpu_and_on_gpus(settings, monkeypatch):
    cpu = local.job_defaults(settings)
    assert cpu.use_gpu is False and cpu.storage_path is None
    # nothing preempts a local node; the job's processes are told which cluster is theirs (another may run beside)
    address = f"127.0.0.1:{settings.local.gcs_port}"
    assert cpu.env == {"RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0", "RAY_ADDRESS": address}
    assert [v["label"] for v in local.benchmark_variants(settings)] == ["gloo"]
    monkeypatch.setattr(local, "resolve_local_gpus", lambda s: 1)
    gpu = local.job_defaults(config.with_overrides(settings, storage_path="/data/ckpt"))
    assert gpu.use_gpu is True and gpu.storage_path == "/data/ckpt"
    assert gpu.env == {"RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0", "RAY_ADDRESS": address, "NCCL_NVLS_ENABLE": "0"}
    assert [v["label"] for v in local.benchmark_variants(settings)] == ["p2p", "socket"]


def test_expected_transport_is_p2p_between_local_gpus_and_none_on_cpu(settings):
    assert local.expected_transport(settings) == "none"  # CPU workers talk gloo: no NCCL transport to audit
    assert local.expected_transport(settings, gpus=0) == "none"
    assert local.expected_transport(settings, gpus=1) == "p2p"
    assert local.expected_transport(config.with_overrides(settings, gpus_per_worker_node=2)) == "p2p"
    assert local.expected_transport(config.with_overrides(settings, expect="socket"), gpus=1) == "socket"


def test_infra_rows_say_they_do_not_apply(settings):
    rows = local.infra_criteria(settings)
    assert len(rows) == 3 and all(ok is None and "n/a on local" in why for _, ok, why in rows)


def test_job_server_needs_a_running_cluster(settings, monkeypatch):
    from tests.helpers import fake_local_status

    fake_local_status(monkeypatch, running=False)
    with pytest.raises(RuntimeError, match="run 02_cluster"):
        with local.job_server(settings):
            pass
    fake_local_status(monkeypatch, running=True)
    with local.job_server(settings) as url:
        assert url == "http://127.0.0.1:8266"
