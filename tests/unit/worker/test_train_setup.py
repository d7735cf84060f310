"""A rank's set-up: its Ray Data shard is asked for, and its first batch fetched, while the model is built."""

from __future__ import annotations

import threading

import pytest

from raytrain_helpers.worker import train
from tests.helpers import job_cfg

torch = pytest.importorskip("torch")
ray_train = pytest.importorskip("ray.train")
pytest.importorskip("ray.train.torch")


class _Context:
    def get_world_rank(self):
        return 0

    def get_world_size(self):
        return 1


class _Shard:
    """A Ray Data shard stand-in: records when it is asked for a batch."""

    def __init__(self, events: list[str], first_batch_asked: threading.Event):
        self.events, self.first_batch_asked = events, first_batch_asked

    def iter_torch_batches(self, batch_size, drop_last):
        self.first_batch_asked.set()
        for i in range(4):
            yield {"input_ids": torch.full((batch_size, 16), i)}


@pytest.fixture
def rank(monkeypatch):
    """The surroundings of a rank's set-up (``this_rank``, ``data_readers``, ``build_sharded_model``) on one CPU
    rank, recording the order of what it asks for."""
    import ray
    import ray.train.torch

    events: list[str] = []
    asked = threading.Event()

    def get_dataset_shard(name):
        events.append("dataset shard")
        return _Shard(events, asked)

    def build_model(cfg, device):
        events.append("model built")
        # the first batch is on its way while the model is built: the build waits for the shard to be asked
        events.append("first batch asked during the build" if asked.wait(10) else "first batch not asked")
        return torch.nn.Linear(4, 4)

    monkeypatch.setattr(ray.train, "get_context", lambda: _Context())
    monkeypatch.setattr(ray.train, "get_dataset_shard", get_dataset_shard)
    monkeypatch.setattr(ray.train.torch, "get_device", lambda: torch.device("cpu"))
    monkeypatch.setattr(ray, "get_runtime_context", lambda: type("C", (), {"get_node_id": lambda self: "n0"})())
    monkeypatch.setattr(train, "build_model", build_model)
    monkeypatch.setattr(train, "shard_model", lambda model, mixed_precision: model)
    return events


def test_the_dataset_shard_is_asked_for_and_read_while_the_model_is_built(rank):
    cfg = job_cfg()
    me = train.this_rank(cfg)  # as train_loop_per_worker sets up: the rank, its data, then the model
    reader, _ = train.data_readers(cfg, me, eval_rows=None)
    train.build_sharded_model(cfg, me)
    assert rank == ["dataset shard", "model built", "first batch asked during the build"]
    assert [int(reader.next()[0][0, 0]) for _ in range(4)] == [0, 1, 2, 3]  # the prefetched batch is the first
