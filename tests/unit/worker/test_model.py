"""Pretrained weights the FSDP2 way, and the export, on a real 2-process gloo group (CPU, no Ray).

One spawn serves both tests (two processes importing transformers are the slow part): rank 0 writes what it
gathered, the tests compare it with the files."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from raytrain_helpers.worker import model as model_mod  # noqa: E402
from tests.helpers import SMALL_MODEL, free_port  # noqa: E402

#: One pytest-xdist worker runs the module: its tests share the spawned FSDP run (module fixture), which each worker
#: would otherwise spawn again.
pytestmark = pytest.mark.xdist_group("fsdp-model")


def _worker(rank: int, world: int, port: int, src: str, out: str) -> None:
    """Load ``src`` sharded, check it on every rank, train one step, export to ``out``; rank 0 saves gathers."""
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        model = model_mod.load_pretrained(src, torch.device("cpu"), rank=rank, mixed_precision=False)
        assert model.lm_head.weight is model.model.embed_tokens.weight, "tied embeddings lost"
        rotary = model.model.rotary_emb
        assert torch.equal(rotary.inv_freq, type(rotary)(config=rotary.config).inv_freq), "inv_freq not re-created"
        up = model.model.layers[0].mlp.up_proj.weight
        assert up.to_local().shape[0] < up.shape[0], "the decoder layer is not sharded"
        # cloned: where a rank already holds a whole tensor the gathered one may share the live parameter's storage
        loaded = {k: v.clone() for k, v in model_mod.gather_full_state(model).items()}
        ids = torch.arange(12).reshape(1, 12)
        with torch.no_grad():  # as the job's eval does before training, then back to sharded
            logits = model(input_ids=ids).logits
        model.reshard()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        batch = torch.randint(0, 300, (2, 16), generator=torch.Generator().manual_seed(rank))
        model(input_ids=batch, labels=batch).loss.backward()
        opt.step()
        trained = model_mod.gather_full_state(model)
        if rank == 0:
            model_mod.write_hf_folder(trained, model.config, out, model_dir=None, meta={"step": 1})
            torch.save({"loaded": loaded, "logits": logits, "trained": trained}, out + ".pt")
        # both ranks leave together: a rank tearing gloo down while its peer still writes aborted once (SIGABRT,
        # "terminate called without an active exception") on a loaded 2-core machine
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    import torch.multiprocessing as mp

    tmp = tmp_path_factory.mktemp("fsdp")
    torch.manual_seed(3)
    ref = model_mod.build_random(SMALL_MODEL, "cpu")
    with torch.no_grad():  # nothing left at its default: norms and biases too
        for p in ref.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    ref.save_pretrained(tmp / "src")
    out = str(tmp / "model")
    mp.spawn(_worker, args=(2, free_port(), str(tmp / "src"), out), nprocs=2, join=True)
    return dict(src=str(tmp / "src"), out=out, **torch.load(out + ".pt"))


def test_pretrained_weights_after_meta_init_sharding_and_broadcast_equal_the_saved_ones(run):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    saved = load_file(os.path.join(run["src"], "model.safetensors"))
    assert "lm_head.weight" not in saved  # tied: saved once, filled in on load
    assert set(run["loaded"]) == set(saved) | {"lm_head.weight"}
    for k, v in saved.items():
        assert torch.equal(run["loaded"][k], v), k
    assert torch.equal(run["loaded"]["lm_head.weight"], saved["model.embed_tokens.weight"])
    ref = AutoModelForCausalLM.from_pretrained(run["src"]).eval()
    ids = torch.arange(12).reshape(1, 12)
    torch.testing.assert_close(run["logits"], ref(input_ids=ids).logits, rtol=1e-5, atol=1e-5)


def test_export_round_trip_equals_the_trained_shards_gathered(run):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = run["out"]
    assert sorted(os.listdir(out)) == sorted(
        ["config.json", "model.safetensors", "raytrain_export.json", "tokenizer.json", "tokenizer_config.json"]
    )
    state = AutoModelForCausalLM.from_pretrained(out).state_dict()
    assert set(state) == set(run["trained"])
    for k, v in run["trained"].items():
        assert torch.equal(state[k], v), k
    changed = [k for k in run["trained"] if not torch.equal(run["trained"][k], run["loaded"][k])]
    assert set(changed) == set(run["trained"])  # one AdamW step moved every tensor
    tok = AutoTokenizer.from_pretrained(out)
    assert tok("abc")["input_ids"] == [97, 98, 99] and tok.eos_token_id == 256


def test_export_to_s3_writes_the_same_folder(run, tmp_path):
    """``export_path`` on S3 (storage on aws): the same files land under the prefix, and the weights read back from
    the bucket equal the trained ones (moto's S3, reached by pyarrow through ``AWS_ENDPOINT_URL``)."""
    import boto3
    from safetensors.torch import load_file
    from transformers import AutoConfig

    from tests.fakes.aws.moto_env import moto_server

    with moto_server():
        s3 = boto3.client("s3", region_name="us-west-2")
        s3.create_bucket(Bucket="rt-ckpt", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        config = AutoConfig.from_pretrained(run["out"])
        model_mod.write_hf_folder(run["trained"], config, "s3://rt-ckpt/runs/r1/model", model_dir=None, meta={})
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="rt-ckpt")["Contents"])
        assert keys == [f"runs/r1/model/{n}" for n in sorted(os.listdir(run["out"]))]
        s3.download_file("rt-ckpt", "runs/r1/model/model.safetensors", str(tmp_path / "m.safetensors"))
    saved = load_file(str(tmp_path / "m.safetensors"))
    assert set(saved) == set(run["trained"]) - {"lm_head.weight"}  # tied: once
    for k, v in saved.items():
        assert torch.equal(v, run["trained"][k]), k
