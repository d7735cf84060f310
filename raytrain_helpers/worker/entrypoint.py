"""The Ray Job entrypoint: ``python -m raytrain_helpers.worker.entrypoint --config job_config.json``.

Runs as the job's driver on the head (local raylet or head pod), builds the ``TorchTrainer`` and prints
one ``RAYTRAIN_RESULT {json}`` line that the notebook side parses from the job logs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ..core.constants import RESULT_PREFIX, TRAIN_SLOT
from . import data as data_mod
from .formats import DataFormatError
from .hub import ModelSourceError, resolve_config_dir
from .job_config import JobConfig, JobConfigError, uses_gpu
from .sources import DataSourceError
from .train import loop_config, train_loop_per_worker


def _num_workers(requested: int, use_gpu: bool) -> int:
    import ray

    total = ray.cluster_resources()
    slots = int(total.get(TRAIN_SLOT, 0))
    if use_gpu:
        slots = min(slots, int(total.get("GPU", 0))) if slots else int(total.get("GPU", 0))
    if slots < 1:
        raise SystemExit(f"the cluster offers no '{TRAIN_SLOT}' resource (worker nodes): nothing to train on")
    if requested and requested > slots:
        raise SystemExit(f"num_workers = {requested} but the cluster has {slots} worker slots")
    return requested or slots


def datasets_for(cfg: JobConfig) -> tuple[dict[str, Any], Any]:
    """The job's ``train`` Ray Dataset and its held-out rows for ``train.data``, tokenized for the model.

    The driver runs on the head: it fetches a hub model's config and tokenizer only, never its weights (the
    training workers load those into their own cache)."""
    model_dir = None
    if cfg.model_id:
        try:
            model_dir = resolve_config_dir(cfg.model_id)
        except ModelSourceError as e:
            raise SystemExit(f"[driver] {e}") from None
    vocab = int(cfg.model["vocab_size"])
    try:
        return data_mod.build_datasets(cfg, model_dir, vocab), data_mod.eval_rows(cfg, model_dir, vocab)
    except (DataSourceError, DataFormatError) as e:  # a missing file or column: the message names the fix
        raise SystemExit(f"[driver] {e}") from None


#: After a failed run, how long the driver waits for Ray to mark a lost node dead: the GCS declares a node dead
#: after missed health checks (about 15 s with Ray's defaults), often after Ray Train has already given up.
NODE_DEATH_WAIT_S = 30.0


def node_table(wait_for_a_death: bool = False) -> list[dict[str, Any]]:
    """The cluster's nodes as the driver sees them. ``wait_for_a_death``: the run failed, so ask again (up to
    ``NODE_DEATH_WAIT_S``) until a worker node shows as dead, in case a lost node is why it failed."""
    import ray

    deadline = time.monotonic() + (NODE_DEATH_WAIT_S if wait_for_a_death else 0.0)
    if wait_for_a_death:
        print(f"[driver] the run failed: asking Ray for {NODE_DEATH_WAIT_S:.0f} s whether a node died", flush=True)
    while True:
        nodes = [
            dict(
                node_id=n["NodeID"],
                alive=n["Alive"],
                host=n.get("NodeManagerHostname"),
                is_head="node:__internal_head__" in (n.get("Resources") or {}),
                resources={k: v for k, v in (n.get("Resources") or {}).items() if not k.startswith("node:")},
            )
            for n in ray.nodes()
        ]
        if any(not n["alive"] and not n["is_head"] for n in nodes) or time.monotonic() >= deadline:
            return nodes
        time.sleep(1.0)


def run(cfg: JobConfig) -> dict[str, Any]:
    import ray
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    ray.init(log_to_driver=True)
    use_gpu = uses_gpu(cfg.use_gpu, ray.cluster_resources())
    n = _num_workers(int(cfg.num_workers or 0), use_gpu)
    res = {TRAIN_SLOT: 1, "CPU": 1}
    if use_gpu:
        res["GPU"] = 1
    cfg = cfg.replace(num_workers=n)
    print(
        f"[driver] TorchTrainer: {n} workers, use_gpu={use_gpu}, backend={'nccl' if use_gpu else 'gloo'}, "
        f"run={cfg.run_name}, storage={cfg.storage_path}",
        flush=True,
    )
    datasets, held_out = datasets_for(cfg)
    # the held-out rows go to Ray's object store once; every worker reads them from there (train_loop_config
    # carries the reference, not the rows)
    eval_rows = ray.put(held_out)
    print(
        f"[driver] data: {cfg.data or data_mod.LEARNABLE} -> Ray Dataset 'train' (split over the workers), "
        f"{len(held_out['input_ids'])} held-out rows",
        flush=True,
    )
    trainer = TorchTrainer(
        train_loop_per_worker,
        train_loop_config=loop_config(cfg, eval_rows),
        datasets=datasets,
        dataset_config=data_mod.data_config(),
        scaling_config=ScalingConfig(num_workers=n, use_gpu=use_gpu, resources_per_worker=res),
        run_config=RunConfig(
            name=cfg.run_name,
            storage_path=cfg.storage_path,
            # train.max_failures: restart the worker group from the latest checkpoint after a worker or node died
            failure_config=FailureConfig(max_failures=int(cfg.max_failures or 0)),
        ),
        torch_config=TorchConfig(backend="nccl" if use_gpu else "gloo", timeout_s=600),
    )
    t0 = time.time()
    error = None
    metrics: dict[str, Any] = {}
    checkpoint = None
    try:
        result = trainer.fit()
        metrics = dict(result.metrics or {})
        checkpoint = result.checkpoint.path if result.checkpoint else None
        if result.error:
            error = repr(result.error)
    except Exception as e:  # TrainingFailedError and friends: report, then fail the job
        error = f"{type(e).__name__}: {e}"
    nodes = node_table(wait_for_a_death=error is not None)
    out = dict(
        ok=error is None,
        error=error,
        metrics=metrics,
        checkpoint=checkpoint,
        nodes=nodes,
        wall_s=time.time() - t0,
        num_workers=n,
        use_gpu=use_gpu,
        run_name=cfg.run_name,
        marker=cfg.marker,
        storage_path=cfg.storage_path,
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    args = ap.parse_args(argv)
    with open(args.config) as f:
        text = f.read()
    try:  # before Ray starts: a misspelt or missing key fails the job at once, naming the key
        cfg = JobConfig.from_json(text)
    except JobConfigError as e:
        raise SystemExit(f"[driver] {args.config}: {e}") from None
    out = run(cfg)
    print(RESULT_PREFIX + json.dumps(out, default=str), flush=True)
    if not out["ok"]:
        print(f"[driver] FAILED: {out['error']}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
