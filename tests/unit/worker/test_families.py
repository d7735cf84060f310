"""Any causal LM of the common families goes through the job's own path on a real 2-process gloo group (CPU, no
Ray, no download): pretrained weights loaded the FSDP2 way (meta device, ``fully_shard`` per decoder layer, rank 0
reads, broadcast), a few steps on masked labels, a sharded checkpoint (DCP), a resume into a fresh model, and the
export that ``AutoModelForCausalLM.from_pretrained`` loads back.

Each family's config is built here, tiny (2 layers, hidden 32), from transformers' own config classes. One spawn
runs every family (two processes importing transformers are the slow part)."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from raytrain_helpers.worker import model as model_mod  # noqa: E402
from tests.helpers import free_port  # noqa: E402

pytestmark = pytest.mark.xdist_group("fsdp-model")

BASE = dict(
    vocab_size=300,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)
#: model_type -> what its config needs beyond BASE (head_dim where the family sets it apart from hidden / heads).
FAMILIES = {
    "llama": {},
    "mistral": {},
    "qwen2": {},
    "qwen3": {"head_dim": 8},
    "gemma": {"head_dim": 8},
    "phi": {},
    "phi3": {},
}


def family_config(kind: str) -> dict:
    return dict(BASE, model_type=kind, **FAMILIES[kind])


def _steps(model, rank: int, n: int = 2) -> None:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for k in range(n):
        ids = torch.randint(3, 300, (2, 16), generator=torch.Generator().manual_seed(100 * rank + k))
        labels = ids.clone()
        labels[:, :5] = -100  # a prompt: the loss ignores it, as prompt/completion data has it
        model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return opt


def _worker(rank: int, world: int, port: int, root: str) -> None:
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for kind in FAMILIES:
            src, ckpt = os.path.join(root, kind, "src"), os.path.join(root, kind, "ckpt")
            model = model_mod.load_pretrained(src, torch.device("cpu"), rank=rank, mixed_precision=False)
            layers = model_mod.decoder_layers(model)
            assert len(layers) == 2 and all(type(x).__name__.endswith("DecoderLayer") for x in layers), kind
            loaded = {k: v.clone() for k, v in model_mod.gather_full_state(model).items()}
            with torch.no_grad():  # the buffers re-created after to_empty (rotary, Gemma's embedding scale) count
                logits = model(input_ids=torch.arange(3, 15).reshape(1, 12)).logits
            model.reshard()
            opt = _steps(model, rank)
            msd, osd = get_state_dict(model, opt)
            dcp.save({"model": msd, "optim": osd}, checkpoint_id=ckpt)  # every rank writes its shards
            trained = {k: v.clone() for k, v in model_mod.gather_full_state(model).items()}
            # resume: a fresh model and optimizer, filled from the checkpoint, then one more step on each side
            again = model_mod.load_pretrained(src, torch.device("cpu"), rank=rank, mixed_precision=False)
            opt2 = _steps(again, rank, n=0)
            _steps(again, rank + 7, n=1)  # materialise the optimizer state DCP fills
            msd2, osd2 = get_state_dict(again, opt2)
            state = {"model": msd2, "optim": osd2}
            dcp.load(state, checkpoint_id=ckpt)
            set_state_dict(again, opt2, model_state_dict=state["model"], optim_state_dict=state["optim"])
            resumed = model_mod.gather_full_state(again)
            if rank == 0:
                model_mod.write_hf_folder(
                    trained, model.config, os.path.join(root, kind, "out"), model_dir=None, meta={}
                )
                torch.save(
                    {"loaded": loaded, "trained": trained, "resumed": resumed, "logits": logits},
                    os.path.join(root, kind, "states.pt"),
                )
            dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    import torch.multiprocessing as mp

    root = tmp_path_factory.mktemp("families")
    for kind in FAMILIES:
        torch.manual_seed(5)
        ref = model_mod.build_random(family_config(kind), "cpu")
        with torch.no_grad():
            for p in ref.parameters():
                p.add_(torch.randn_like(p) * 0.05)
        ref.save_pretrained(root / kind / "src")
    mp.spawn(_worker, args=(2, free_port(), str(root)), nprocs=2, join=True)
    return {kind: dict(root=root / kind, **torch.load(root / kind / "states.pt")) for kind in FAMILIES}


@pytest.mark.parametrize("kind", list(FAMILIES))
def test_a_family_loads_sharded_trains_checkpoints_resumes_and_exports(runs, kind):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    r = runs[kind]
    saved = load_file(r["root"] / "src" / "model.safetensors")
    for k, v in saved.items():  # the broadcast weights are the saved ones
        assert torch.equal(r["loaded"][k], v.to(r["loaded"][k].dtype)), (kind, k)
    ref = AutoModelForCausalLM.from_pretrained(r["root"] / "src").eval()
    with torch.no_grad():
        want = ref(input_ids=torch.arange(3, 15).reshape(1, 12)).logits
    assert torch.allclose(r["logits"], want, atol=1e-5), f"{kind}: the sharded model computes other logits"
    changed = [k for k in r["trained"] if not torch.equal(r["trained"][k], r["loaded"][k])]
    assert changed, f"{kind}: training changed nothing"
    for k, v in r["trained"].items():  # the resumed model holds exactly the checkpointed weights
        assert torch.equal(r["resumed"][k], v), (kind, k)
    back = AutoModelForCausalLM.from_pretrained(r["root"] / "out")
    assert back.config.model_type == kind
    for k, v in back.state_dict().items():
        assert torch.equal(v, r["trained"][k].to(v.dtype)), (kind, k)


def test_a_model_without_decoder_layers_is_a_clear_error():
    with pytest.raises(ValueError, match=r"Linear: no decoder layers found.*Fix"):
        model_mod.decoder_layers(torch.nn.Linear(2, 2))


def test_the_decoder_layers_are_those_of_the_family_not_only_qwen2s_path():
    for kind in FAMILIES:
        m = model_mod.build_random(family_config(kind), "meta")
        assert [type(x).__name__ for x in model_mod.decoder_layers(m)] == [type(m.model.layers[0]).__name__] * 2
