"""01 on the local target: this machine's resources against the cluster's shape."""

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.targets.local import resources


def test_local_resources_flags_too_many_workers(clean_env, repo_root):
    s = config.load(repo_root / "env.yaml", environ={}, num_workers=64, gpus_per_worker_node=0)
    cap = resources.local_resources(s)
    assert not cap.ok
    assert any("num_workers = 64" in p for p in cap.problems)
    ok = resources.local_resources(config.load(repo_root / "env.yaml", environ={}, gpus_per_worker_node=0))
    assert ok.ok and ok.world_size == 2 and ok.backend == "gloo"


def test_the_cpu_and_worker_rows_check_what_they_show(repo_root, monkeypatch):
    """16 worker nodes x 8 CPUs on a 2-core machine is SHORT (not 'ok'); one training worker is below the 2 shown."""
    from raytrain_helpers.core.config import load
    from raytrain_helpers.targets.local import resources

    monkeypatch.setattr(resources.os, "cpu_count", lambda: 2)
    big = resources.local_resources(
        load(repo_root / "env.yaml", environ={}, worker_nodes=16, cpus_per_worker_node=8, gpus_per_worker_node=0)
    )
    rows = {r[0]: r for r in big.rows()}
    assert rows["CPU cores"][1:] == ("2", "16 worker node(s) x 8", "SHORT")
    assert any("local.worker_nodes" in p and "128 cores" in p for p in big.problems)

    one = resources.local_resources(load(repo_root / "env.yaml", environ={}, worker_nodes=1, gpus_per_worker_node=0))
    rows = {r[0]: r for r in one.rows()}
    assert rows["training workers"][2:] == (">= 2 over 1 node(s)", "SHORT") and not one.ok

    fine = resources.local_resources(load(repo_root / "env.yaml", environ={}, gpus_per_worker_node=0))
    rows = {r[0]: r for r in fine.rows()}
    assert rows["CPU cores"][3] == "ok" and rows["training workers"][3] == "ok"


class _TorchAsked(Exception):
    pass


class _Torch:
    """A torch stand-in whose CUDA query raises: the test sees whether torch was asked at all."""

    class cuda:  # noqa: N801 - torch's own name
        @staticmethod
        def is_available():
            raise _TorchAsked

        @staticmethod
        def device_count():  # pragma: no cover - only after is_available
            raise _TorchAsked


def test_without_gpu_device_files_torch_is_not_asked_for_gpus(monkeypatch):
    """No GPU driver's device files: no GPUs, without importing torch (seconds at each submit from a fresh kernel)."""
    import sys

    monkeypatch.setitem(sys.modules, "torch", _Torch)
    monkeypatch.setattr(resources.glob, "glob", lambda pattern: [])
    assert resources._visible_gpus() == []
    monkeypatch.setattr(resources.glob, "glob", lambda pattern: ["/dev/nvidia0"] if "nvidia" in pattern else [])
    with pytest.raises(_TorchAsked):  # with a driver's device files, torch is asked
        resources._visible_gpus()
