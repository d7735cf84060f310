"""Ray Train in thirty lines: a function every worker runs, a ``TorchTrainer`` that starts them.

Two CPU workers train a one-layer model with DDP over gloo; each prints its loss per step.
Run it: ``python -m raytrain_helpers.worker.tiny_trainer``. ``ray.init()`` joins the cluster
``RAY_ADDRESS`` names, else one this machine runs, else starts one of its own. No GPU needed.
"""

import tempfile

import ray
import ray.train
import torch
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer, prepare_model


def train_loop_per_worker(config):
    model = prepare_model(torch.nn.Linear(4, 1))  # wraps it in DDP: gradients averaged over the workers
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rank = ray.train.get_context().get_world_rank()
    x, y = torch.randn(64, 4), torch.randn(64, 1)  # each rank: its own batch
    for step in range(config["steps"]):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"rank {rank} step {step} loss {loss.item():.3f}")
    ray.train.report({"loss": loss.item()})


def main():
    ray.init()  # RAY_ADDRESS, or a cluster running here (notebook 02's), or a Ray of its own
    trainer = TorchTrainer(
        train_loop_per_worker,
        train_loop_config={"steps": 5},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),  # 2 CPU workers, gloo
        run_config=RunConfig(storage_path=tempfile.mkdtemp()),
    )
    return trainer.fit()


if __name__ == "__main__":
    main()
