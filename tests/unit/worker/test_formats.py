"""The data's forms on real tokenizers built here (a BPE tokenizer trained on a few sentences with ``tokenizers``, and a
word-level one, each wrapped as ``PreTrainedTokenizerFast`` with a ChatML-style chat template; nothing downloaded):
which tokens the loss sees (labels -100 for prompts, system and user turns and the template's headers), the errors
naming the setting and the fix, and a resumed reader that neither repeats nor skips rows in each form."""

from __future__ import annotations

import json

import pytest

from raytrain_helpers.worker import data, formats, sources

torch = pytest.importorskip("torch")

#: A ChatML-style template (the form Qwen's instruct models use): each turn between <|im_start|>role and <|im_end|>.
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.",
    "How many clips did Natalia sell altogether in April and May?",
    "Weng earns 12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting.",
    "You are a helpful assistant. The answer is 72 clips. Natalia sold 24 clips in May.",
] * 20


def bpe_tokenizer():
    """A byte-level BPE tokenizer trained here on :data:`CORPUS` (real merges: tokens span several characters)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    fast.chat_template = CHATML
    return fast


def wordlevel_tokenizer():
    """Words and punctuation, one token each, from a vocabulary made here."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for s in CORPUS for w in s.replace("?", " ?").replace(".", " .").replace(",", " ,").split()})
    specials = ["[UNK]", "<eos>", "<|im_start|>", "<|im_end|>", "\n", "user", "assistant", "system"]
    vocab = {w: i for i, w in enumerate(specials + words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split("\n", "isolated"), pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="[UNK]")
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    fast.chat_template = CHATML.replace("\n", " \n ")
    return fast


TOKENIZERS = {"bpe": bpe_tokenizer, "wordlevel": wordlevel_tokenizer}


def _trained(tok, ids, labels) -> list[int]:
    return [i for i, lab in zip(ids, labels, strict=True) if lab != formats.IGNORE]


@pytest.mark.parametrize("which", list(TOKENIZERS))
def test_prompt_completion_trains_only_on_the_completion_and_eos(which):
    tok = TOKENIZERS[which]()
    prompt, completion = "How many clips did Natalia sell altogether in April and May?", " The answer is 72 clips."
    [(ids, labels)] = formats.encode_prompt_completion(
        tok, [prompt], [completion], "Question: {prompt}", tok.eos_token_id
    )
    assert (
        len(ids) == len(labels) and ids[-1] == labels[-1] == tok.eos_token_id
    )  # EOS trained: the model learns to stop
    head = len(tok("Question: " + prompt, add_special_tokens=False)["input_ids"])
    assert labels[:head] == [formats.IGNORE] * head  # every prompt token ignored
    squeeze = str.maketrans("", "", " ")  # the word-level decoder puts spaces between tokens
    assert tok.decode(_trained(tok, ids, labels)[:-1]).translate(squeeze) == completion.translate(squeeze)
    assert all(lab == i for i, lab in zip(ids, labels, strict=True) if lab != formats.IGNORE)


@pytest.mark.parametrize("which", list(TOKENIZERS))
def test_chat_trains_only_on_the_assistant_turns(which):
    tok = TOKENIZERS[which]()
    conv = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "How many clips did Natalia sell?"},
        {"role": "assistant", "content": "The answer is 72 clips."},
        {"role": "user", "content": "How many in May?"},
        {"role": "assistant", "content": "Natalia sold 24 clips in May."},
    ]
    [(ids, labels)] = formats.encode_chat(tok, [conv], tok.eos_token_id)
    assert ids[-1] == tok.eos_token_id and labels[-1] == formats.IGNORE
    text = tok.decode(_trained(tok, ids, labels), skip_special_tokens=False).replace(" ", "")
    assert "Theansweris72clips" in text and "Nataliasold24clipsinMay" in text
    for context in ("helpfulassistant", "Howmanyclips", "HowmanyinMay", "system", "user"):
        assert context not in text, context
    assert text.count("<|im_end|>") == 2  # each reply's end-of-turn marker is trained on: the model learns to stop
    full = tok.decode(ids, skip_special_tokens=False).replace(" ", "").replace("\n", "")
    assert "Youareahelpfulassistant." in full and "<|im_start|>user" in full  # the context is there, untrained


def test_chat_without_a_template_names_the_setting_and_the_fix():
    tok = bpe_tokenizer()
    tok.chat_template = None
    with pytest.raises(formats.DataFormatError, match=r"train.data_format = chat.*no chat template.*Fix:"):
        formats.encode_chat(tok, [[{"role": "user", "content": "hi"}]], tok.eos_token_id)


def test_auto_picks_the_form_from_the_columns_and_a_missing_column_names_the_fix():
    assert formats.pick_format("auto", ["messages", "id"], None, "x") == "chat"
    assert formats.pick_format("auto", ["prompt", "completion"], None, "x") == "prompt_completion"
    assert formats.pick_format("auto", ["question", "answer"], {"prompt": "question", "completion": "answer"}, "x") == (
        "prompt_completion"
    )
    assert formats.pick_format("auto", ["text"], None, "x") == "text"
    with pytest.raises(formats.DataFormatError, match=r"'q.parquet' has the columns \['a', 'b'\].*train.data_columns"):
        formats.pick_format("auto", ["a", "b"], None, "q.parquet")
    with pytest.raises(formats.DataFormatError, match=r"no column 'completion'.*prompt_completion.*Fix:"):
        formats.pick_format("prompt_completion", ["prompt"], None, "q.parquet")


def _rows(fmt: str, n: int = 60) -> list[dict]:
    if fmt == "text":
        return [{"text": f"row {i}: " + CORPUS[i % 4]} for i in range(n)]
    if fmt == "prompt_completion":
        return [{"prompt": f"row {i}: " + CORPUS[i % 4], "completion": f" answer {i}."} for i in range(n)]
    return [
        {"messages": [{"role": "user", "content": f"row {i}?"}, {"role": "assistant", "content": f"answer {i}."}]}
        for i in range(n)
    ]


@pytest.mark.parametrize("fmt", ["text", "prompt_completion", "chat"])
@pytest.mark.parametrize("stop_at", [1, 4])
def test_a_resumed_reader_neither_repeats_nor_skips_rows_in_each_form(tmp_path, fmt, stop_at):
    """The packed rows of each form (ids and labels) as Ray Train's shard gives them, the same order each epoch;
    a reader resumed from a checkpoint's position reads on from the next batch."""
    bpe_tokenizer().save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "qwen2"}')
    rows = _rows(fmt)
    cols = {c: [r[c] for r in rows] for c in rows[0]}
    packed = data.RowPacker(24, str(tmp_path), has_own_tokenizer=True, fmt=fmt)(cols)
    assert (packed["labels"] == formats.IGNORE).any() == (fmt != "text")
    batches = [
        {"input_ids": torch.tensor(packed["input_ids"][i : i + 2]), "labels": torch.tensor(packed["labels"][i : i + 2])}
        for i in range(0, len(packed["input_ids"]) - 1, 2)
    ]
    straight = data.ShardReader(lambda epoch: batches)
    seen = [data.digest(straight.next()) for _ in range(len(batches) + 2)]  # across an epoch's end
    first = data.ShardReader(lambda epoch: batches)
    before = [data.digest(first.next()) for _ in range(stop_at)]
    resumed = data.ShardReader(lambda epoch: batches, **first.position())
    after = [data.digest(resumed.next()) for _ in range(len(seen) - stop_at)]
    assert before + after == seen and len(set(seen[: len(batches)])) == len(batches)


def test_held_out_rows_of_a_file_are_the_rows_the_job_never_trains_on(tmp_path):
    rows = [{"question": f"q{i}", "answer": f"#### {i}", "id": i} for i in range(400)]
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cols = {"prompt": "question", "completion": "answer"}
    got, fmt = sources.held_out_rows(str(tmp_path / "qa.jsonl"), "auto", cols, n=5, every=data.EVAL_EVERY_NTH)
    assert fmt == "prompt_completion" and len(got) == 5
    assert all(data.is_eval_row(fmt, r) for r in got)
    packer = data.RowPacker(8, split="train", fmt=fmt, columns=cols)
    trained = packer.rows({"question": [r["question"] for r in rows], "answer": [r["answer"] for r in rows]})
    assert not {r["prompt"] for r in got} & {r["prompt"] for r in trained}


def test_a_missing_file_or_a_folder_of_mixed_kinds_names_the_setting_and_the_fix(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(sources.DataSourceError, match=r"train.data = .*holds no .jsonl.*Fix:.*hf://datasets/"):
        sources.list_files(str(tmp_path / "empty"))
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "a.jsonl").write_text("{}\n")
    (tmp_path / "mixed" / "b.csv").write_text("a\n1\n")
    with pytest.raises(sources.DataSourceError, match=r"expected files of one kind.*Fix:"):
        sources.file_kind(sources.list_files(str(tmp_path / "mixed")), str(tmp_path / "mixed"))


def test_a_hub_path_is_listed_through_the_hub_filesystem_with_the_token_from_the_environment(monkeypatch):
    """hf:// paths go through huggingface_hub's HfFileSystem, built with HF_TOKEN from the environment (on aws the
    Ray pods get it from the cluster's Secret); a dataset that cannot be listed names the fix."""
    import huggingface_hub

    made = []

    class FakeHub:  # only what list_files calls: isfile and find (fsspec's AbstractFileSystem API)
        def __init__(self, token=None):
            made.append(token)

        def isfile(self, path):
            return False

        def find(self, path):
            if "private" in path:
                raise PermissionError("401 Unauthorized")
            return ["datasets/openai/gsm8k/main/train-00000-of-00001.parquet", "datasets/openai/gsm8k/README.md"]

    monkeypatch.setattr(huggingface_hub, "HfFileSystem", FakeHub)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    got = sources.list_files("hf://datasets/openai/gsm8k/main")
    assert got == ["hf://datasets/openai/gsm8k/main/train-00000-of-00001.parquet"] and made == ["hf_secret"]
    with pytest.raises(sources.DataSourceError, match=r"cannot be listed.*hf_token_secret"):
        sources.list_files("hf://datasets/me/private")
