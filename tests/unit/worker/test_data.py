"""The job's data: the learnable corpus, the byte tokenizer, packing, the held-out split, resuming a shard."""

from __future__ import annotations

import pytest

from raytrain_helpers.worker import data
from tests.helpers import job_cfg

torch = pytest.importorskip("torch")


def test_learnable_lines_follow_the_alphabet_and_are_reproducible():
    lines = data.learnable_lines(0, n=200)
    assert lines == data.learnable_lines(0, n=200) and lines != data.learnable_lines(1, n=200)
    for line in lines:
        assert 8 <= len(line) <= 26
        assert all((ord(b) - ord(a)) % 26 == 1 for a, b in zip(line, line[1:], strict=False)), line


def test_eval_split_is_held_out_by_row_and_prompts_come_from_it():
    rows = data.learnable_rows(0)
    key = {id(r): data.is_eval_row("prompt_completion", r) for r in rows}
    held = {r["prompt"] + r["completion"] for r in rows if key[id(r)]}
    trained = {r["prompt"] + r["completion"] for r in rows if not key[id(r)]}
    assert held and trained and not held & trained
    assert 0.02 < len([r for r in rows if key[id(r)]]) / len(rows) < 0.10
    assert all(len(r["prompt"]) == data.LEARNABLE_PROMPT for r in rows)
    pairs = data.held_out_prompts(0)
    assert len(pairs) >= 20 and len(set(pairs)) == len(pairs)  # 06's before/after table: at least 20 prompts
    for prompt, answer in pairs:
        assert any(prompt + answer in t for t in held)  # cut from a held-out line, which no training row holds
        assert ALPHABET_NEXT(prompt[-1]) == answer[0]


def ALPHABET_NEXT(c: str) -> str:  # noqa: N802 - reads as a constant mapping
    return data.ALPHABET[(data.ALPHABET.index(c) + 1) % 26]


def test_packing_appends_eos_and_cuts_rows_of_seq_len():
    ids, labels = data.RowPacker(8).pack([{"text": "abc"}, {"text": "defgh"}, {"text": "ij"}])
    assert ids == [[97, 98, 99, data.BYTE_EOS, 100, 101, 102, 103]] == labels  # the short tail is dropped
    out = data.RowPacker(4)({"text": ["abcdefg", "xy"]})
    assert out["input_ids"].shape == out["labels"].shape == (2, 4) and out["input_ids"].dtype.name == "int64"


def test_the_learnable_rows_train_only_on_their_completions():
    ids, labels = data.RowPacker(64, fmt="prompt_completion").pack([{"prompt": "abcd", "completion": "efg"}] * 9)
    assert ids[0][:8] == [97, 98, 99, 100, 101, 102, 103, data.BYTE_EOS]
    assert labels[0][:8] == [-100] * 4 + [101, 102, 103, data.BYTE_EOS]


def test_the_packer_of_a_split_packs_only_that_splits_rows():
    rows = data.learnable_rows(0, 2000)
    batch = {c: [r[c] for r in rows] for c in ("prompt", "completion")}
    for split, keep in (("train", False), ("eval", True)):
        got = data.RowPacker(16, split=split, fmt="prompt_completion")(batch)["input_ids"].tolist()
        want = [r for r in rows if data.is_eval_row("prompt_completion", r) == keep]
        assert got == data.RowPacker(16, fmt="prompt_completion").pack(want)[0], split
    n = {s: len(data.RowPacker(16, split=s, fmt="prompt_completion")(batch)["input_ids"]) for s in ("eval", "train")}
    assert n["eval"] < n["train"]


def test_the_driver_packs_the_held_out_rows_of_the_learnable_corpus_block_by_block():
    """What every evaluation reads: only held-out rows, packed per block like the train split's tasks, cut to
    EVAL_MAX_BATCHES batches per rank; the same rows every time."""
    cfg = job_cfg(data="learnable", seq_len=16, batch_size=2, seed=0, num_workers=2)
    got = data.eval_rows(cfg, None, data.BYTE_VOCAB)
    rows = got["input_ids"]
    lines = data.learnable_rows(0)
    half = len(lines) // data.LEARNABLE_BLOCKS
    held = [r for r in lines[:half] if data.is_eval_row("prompt_completion", r)]
    first_ids, first_labels = data.RowPacker(16, fmt="prompt_completion").pack(held)
    assert rows.shape == (data.EVAL_MAX_BATCHES * 2 * 2, 16) and rows.dtype.name == "int64"
    assert rows.tolist() == first_ids[: len(rows)] and got["labels"].tolist() == first_labels[: len(rows)]
    assert (rows == data.eval_rows(cfg, None, data.BYTE_VOCAB)["input_ids"]).all()
    long = data.eval_rows(cfg.replace(seq_len=2048, batch_size=22), None, data.BYTE_VOCAB)["input_ids"]
    n_held = sum(len(r["prompt"] + r["completion"]) + 1 for r in lines if data.is_eval_row("prompt_completion", r))
    assert n_held // 2048 - data.LEARNABLE_BLOCKS <= len(long) <= n_held // 2048  # less than a row lost per block
    noise = data.eval_rows(cfg.replace(data="random"), None, 50)["input_ids"]
    assert noise.shape == (data.EVAL_MAX_BATCHES * 2 * 2, 16) and 0 <= noise.min() and noise.max() < 50


def test_every_rank_evaluates_an_equal_share_of_the_held_out_rows():
    rows = list(range(7))
    shares = [data.rank_rows(rows, r, 3) for r in range(3)]
    assert shares == [[0, 1], [2, 3], [4, 5]]  # equal shares, the remainder left out
    assert data.rank_rows(rows[:2], 2, 3) == []  # fewer rows than ranks: no rank evaluates


def test_byte_tokenizer_matches_the_packer_and_fits_the_tiny_vocab():
    from raytrain_helpers.core.config import PRESETS

    tok = data.byte_tokenizer()
    assert tok("hé z")["input_ids"] == data.byte_encode("hé z")
    assert tok.eos_token_id == data.BYTE_EOS and len(tok) == data.BYTE_VOCAB <= PRESETS["tiny"]["vocab_size"]
    assert tok.decode(data.byte_encode("klmn")) == "klmn"


def _epochs(n_batches: int, world: int, rank: int):
    """Rank ``rank``'s shard: every ``world``-th batch of a fixed order, the same every epoch (as Ray gives)."""
    batches = [torch.full((2, 4), 1000 * e + i) for e in range(1) for i in range(n_batches)]
    return lambda epoch: [{"input_ids": b + 100_000 * epoch} for b in batches[rank::world]]


@pytest.mark.parametrize("stop_at", [1, 3, 5, 7])
def test_resume_from_a_position_neither_repeats_nor_skips_data(stop_at):
    straight = data.ShardReader(_epochs(10, 2, 0))
    seen = [data.digest(straight.next()[0]) for _ in range(9)]  # crosses the epoch end (5 batches per epoch)
    first = data.ShardReader(_epochs(10, 2, 0))
    before = [data.digest(first.next()[0]) for _ in range(stop_at)]
    pos = first.position()
    resumed = data.ShardReader(_epochs(10, 2, 0), **pos)
    after = [data.digest(resumed.next()[0]) for _ in range(9 - stop_at)]
    assert before + after == seen
    assert resumed.skipped == before[-pos["batch"] :] if pos["batch"] else resumed.skipped == []
    assert straight.position() == {"epoch": 1, "batch": 4}


@pytest.mark.parametrize("stop_at", [0, 3, 6])
def test_a_prefetched_reader_gives_the_same_batches_from_any_position(stop_at):
    straight = data.ShardReader(_epochs(10, 2, 0))
    seen = [data.digest(straight.next()[0]) for _ in range(9)]
    first = data.ShardReader(_epochs(10, 2, 0))
    before = [data.digest(first.next()[0]) for _ in range(stop_at)]
    resumed = data.ShardReader(_epochs(10, 2, 0))
    resumed.prefetch()  # opened at (0, 0), before the checkpoint's position is known (the training loop's order)
    resumed.epoch, resumed.batch = first.position()["epoch"], first.position()["batch"]
    assert before + [data.digest(resumed.next()[0]) for _ in range(9 - stop_at)] == seen


def test_prefetch_opens_the_shard_and_fetches_the_first_batch_before_next_is_called():
    import threading

    fetched = threading.Event()

    def epoch_batches(epoch):
        for b in _epochs(4, 1, 0)(epoch):
            fetched.set()
            yield b

    reader = data.ShardReader(epoch_batches)
    reader.prefetch()
    assert fetched.wait(5), "prefetch() did not fetch the first batch in the background"
    assert [int(reader.next()[0][0, 0]) for _ in range(5)] == [0, 1, 2, 3, 100_000]


def test_an_error_of_the_prefetched_shard_is_raised_by_next():
    def broken(epoch):
        raise RuntimeError("the shard's coordinator died")
        yield  # pragma: no cover

    reader = data.ShardReader(broken)
    reader.prefetch()
    with pytest.raises(RuntimeError, match="coordinator died"):
        reader.next()


def test_an_empty_shard_is_an_error_not_a_hang():
    with pytest.raises(ValueError, match="shard is empty"):
        data.ShardReader(lambda epoch: []).next()
    prefetched = data.ShardReader(lambda epoch: [])
    prefetched.prefetch()
    with pytest.raises(ValueError, match="shard is empty"):
        prefetched.next()


def test_a_model_with_its_own_tokenizer_is_packed_with_it(tmp_path):
    """``model_id`` naming a folder with a tokenizer: texts are tokenized with that tokenizer (its ids, its EOS),
    not bytes. The tokenizer is made here (a word-level vocabulary of letters), never downloaded."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[EOS]": 0, "[UNK]": 1, **{c: 10 + i for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="[EOS]", unk_token="[UNK]").save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "qwen2", "vocab_size": 36}')  # what a model folder has
    assert data.has_tokenizer(str(tmp_path))

    packer = data.RowPacker(4, str(tmp_path), has_own_tokenizer=True)
    assert packer.encode([{"text": "abc"}]) == [([10, 11, 12, 0], [10, 11, 12, 0])]
    assert packer.pack([{"text": "abc"}, {"text": "xyz"}])[0] == [[10, 11, 12, 0], [33, 34, 35, 0]]
    assert data.RowPacker(4).encode([{"text": "abc"}])[0][0] == [*b"abc", data.BYTE_EOS], "no tokenizer: bytes"


@pytest.mark.parametrize("fmt", ["text", "prompt_completion"])
def test_byte_rows_are_what_the_byte_tokenizer_makes(fmt):
    """Without a model tokenizer the packer writes bytes itself (no tokenizer to load on the driver): the ids and
    labels the byte-level fast tokenizer would give through the masking path of :mod:`.formats`."""
    from raytrain_helpers.worker import formats

    rows = [
        {"text": "héllo", "prompt": "Q: é?", "completion": " ünï"},
        {"text": "ab", "prompt": "x", "completion": "y"},
    ]
    rows = [{k: r[k] for k in formats.COLUMNS[fmt]} for r in rows]
    packer = data.RowPacker(8, fmt=fmt, template="{prompt} A:")
    tok = data.byte_tokenizer()
    if fmt == "text":
        want = formats.encode_text(tok, [r["text"] for r in rows], tok.eos_token_id)
    else:
        want = formats.encode_prompt_completion(
            tok, [r["prompt"] for r in rows], [r["completion"] for r in rows], "{prompt} A:", tok.eos_token_id
        )
    assert [packer.encode_bytes(r) for r in rows] == want
