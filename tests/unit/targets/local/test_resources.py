"""01 on the local target: this machine's resources against the cluster's shape."""

from raytrain_helpers.core import config
from raytrain_helpers.targets.local import resources


def test_local_resources_flags_too_many_workers(clean_env, repo_root):
    s = config.load(repo_root / "env.yaml", environ={}, num_workers=64, gpus_per_worker_node=0)
    cap = resources.local_resources(s)
    assert not cap.ok
    assert any("num_workers = 64" in p for p in cap.problems)
    ok = resources.local_resources(config.load(repo_root / "env.yaml", environ={}, gpus_per_worker_node=0))
    assert ok.ok and ok.world_size == 2 and ok.backend == "gloo"
