"""The training data, through Ray Data: sources, tokenizers, packing, the held-out split, each worker's shard.

Sources (``train.data``):

- ``learnable`` — the alphabet language the tutorial writes itself: each line is a run of consecutive letters,
  wrapping from z to a (``klmnopq``), of random start and length, as a prompt/completion row (its first
  :data:`LEARNABLE_PROMPT` letters the prompt, the rest the completion the loss is computed on: the same path as a
  real task's data). The next letter follows from the current one, so even the tiny model's loss falls within a few
  steps, and a held-out prompt has one right continuation.
- a local file or folder, ``s3://``, or ``hf://datasets/...`` on the Hugging Face Hub (:mod:`.sources`), in one
  of the forms of :mod:`.formats` (``text``, ``prompt_completion``, ``chat``).
- ``random`` — uniformly random token ids, for throughput benchmarks only (nothing can be learned).

Every packed row has ``input_ids`` and ``labels`` (-100 where the loss does not look: prompts, user turns).
The job's driver builds the ``train`` Ray Dataset of packed ``input_ids`` rows: files and S3 are read and packed by
Ray Data tasks on the nodes; the ``learnable`` corpus (which the driver writes itself, about 3 MB of ids) and
``random`` ids are made by the driver and handed to Ray Data as rows (``ray.data.from_items``), so no task has to
start a Python process for them - on a small machine that start costs more than the packing. Ray Train splits the
dataset over the workers (``streaming_split(equal=True)``), and every worker reads its own shard with
``get_dataset_shard("train").iter_torch_batches(...)``. Order is preserved (``ExecutionOptions(preserve_order=True)``,
no locality hints), so with the same data the split gives every rank the same rows in the same order each epoch:
a resumed run skips the batches it consumed before (its position is stored in the checkpoint) and neither repeats
nor skips data.

The held-out rows are few (``EVAL_MAX_BATCHES`` batches per rank, read again at every evaluation), so the driver
makes them once (:func:`eval_rows`) and puts them in Ray's object store; each rank evaluates its equal share. A
second split dataset would cost its own coordinator actor and packing tasks - on a small machine more than the
evaluation itself.

Imports only the standard library here; Ray, pyarrow, numpy and transformers are imported where used.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from . import formats, sources
from .hub import resolve_config_dir
from .job_config import JobConfig

LEARNABLE = "learnable"
RANDOM = "random"
ALPHABET = "abcdefghijklmnopqrstuvwxyz"
#: One row in ``EVAL_EVERY_NTH`` (by a hash of its text) is held out for evaluation, never trained on.
EVAL_EVERY_NTH = 20
#: At most this many eval batches per rank are kept (and evaluated) each time.
EVAL_MAX_BATCHES = 8
#: Lines of the learnable corpus (about 360 k byte tokens: no epoch wraps in the default runs).
LEARNABLE_LINES = 20_000
#: Byte-level tokenizer: ids 0-255 are the bytes, then the special tokens.
BYTE_EOS = 256
BYTE_PAD = 257
BYTE_VOCAB = 258
EOS_TEXT = "<|endoftext|>"
PAD_TEXT = "<|pad|>"


# ---- the learnable corpus ---------------------------------------------------------------------------------------
def alphabet_line(rng: random.Random) -> str:
    """One line of the alphabet language: 8 to 26 consecutive letters from a random start."""
    start, n = rng.randrange(26), rng.randrange(8, 27)
    return "".join(ALPHABET[(start + i) % 26] for i in range(n))


def learnable_lines(seed: int, n: int = LEARNABLE_LINES) -> list[str]:
    rng = random.Random(f"learnable-{seed}")
    return [alphabet_line(rng) for _ in range(n)]


#: The learnable language's rows are prompt/completion pairs: the first letters are the prompt, the rest the
#: completion the loss is computed on (the same path as a real task's data: :mod:`.formats`).
LEARNABLE_PROMPT = 4


def learnable_rows(seed: int, n: int = LEARNABLE_LINES) -> list[dict[str, str]]:
    """The learnable corpus as prompt/completion rows: each line's first :data:`LEARNABLE_PROMPT` letters, the rest."""
    return [{"prompt": s[:LEARNABLE_PROMPT], "completion": s[LEARNABLE_PROMPT:]} for s in learnable_lines(seed, n)]


def is_eval(text: str) -> bool:
    """Held out for evaluation? Decided by the text itself, so the same text is never in both splits."""
    return formats.is_eval_key(text, EVAL_EVERY_NTH)


def held_out_prompts(seed: int, n: int = 20, prompt_len: int = 4, answer_len: int = 4) -> list[tuple[str, str]]:
    """(prompt, expected continuation) pairs cut from held-out rows of the learnable corpus (rows no training
    row holds, see :func:`is_eval_row`), in a fixed order: every window of ``prompt_len + answer_len`` letters of
    those lines, each once. The language has one window per start letter (26), so n is at most 26."""
    seen: dict[str, None] = {}
    width = prompt_len + answer_len
    for row in learnable_rows(seed):
        if is_eval_row(formats.PROMPT_COMPLETION, row):
            line = row["prompt"] + row["completion"]
            for i in range(len(line) - width + 1):
                seen.setdefault(line[i : i + width])
    pairs = [(s[:prompt_len], s[prompt_len:]) for s in sorted(seen)]
    return pairs[:n]


# ---- tokenizers ---------------------------------------------------------------------------------------------------
def byte_encode(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def byte_decode(ids: Iterable[int]) -> str:
    return bytes(int(i) for i in ids if 0 <= int(i) < 256).decode("utf-8", errors="replace")


def byte_tokenizer():
    """The byte-level tokenizer as a ``transformers`` fast tokenizer (ids = bytes, then EOS 256 and PAD 257).

    Built from a vocabulary, never downloaded; ``save_pretrained`` writes files ``AutoTokenizer`` loads back.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    to_char = pre_tokenizers.ByteLevel.alphabet()  # 256 printable stand-ins, one per byte
    byte_char = _bytes_to_unicode()
    assert set(byte_char.values()) == set(to_char)
    vocab = {byte_char[b]: b for b in range(256)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([EOS_TEXT, PAD_TEXT])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS_TEXT, pad_token=PAD_TEXT)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (what the ByteLevel pre-tokenizer uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs), strict=True))


def has_tokenizer(model_dir: str | None) -> bool:
    return bool(model_dir) and any(
        os.path.exists(os.path.join(model_dir, f)) for f in ("tokenizer.json", "tokenizer_config.json")
    )


class RowPacker:
    """Tokenizes rows of one :mod:`.formats` form into ``(input_ids, labels)`` and cuts the stream into rows of
    exactly ``seq_len`` ids (labels alike: :data:`~.formats.IGNORE` where the loss does not look).

    The tail that does not fill a row is dropped (per batch of rows). Used by Ray Data's ``map_batches``, where it
    also selects the split (one operator instead of a filter and a map: on a small machine each operator's first
    tasks start Python processes, which costs more than the work itself). The tokenizer is the model's when
    ``model_id`` has one, else the byte-level one (:func:`byte_tokenizer`)."""

    def __init__(
        self,
        seq_len: int,
        model_id: str | None = None,
        *,
        has_own_tokenizer: bool = False,
        split: str | None = None,
        fmt: str = formats.TEXT,
        columns: dict[str, str] | None = None,
        template: str = "{prompt}",
    ):
        self.seq_len = int(seq_len)
        self.model_id = model_id if has_own_tokenizer else None  # resolved where the batch is tokenized
        self.split = split  # "train" | "eval": keep only that split's rows (see is_eval); None: keep all
        self.fmt, self.template = fmt, template
        self.columns = formats.source_columns(fmt, columns)
        self._tok = None

    @property
    def tokenizer(self):
        if self._tok is None:
            if self.model_id is None:
                self._tok = byte_tokenizer()
            else:
                from transformers import AutoTokenizer

                self._tok = AutoTokenizer.from_pretrained(resolve_config_dir(self.model_id))  # no weights
        return self._tok

    def rows(self, batch: dict[str, Any]) -> list[dict[str, Any]]:
        """The batch's rows under the format's own column names, only this split's."""
        cols = {role: list(batch[col]) for role, col in self.columns.items()}
        n = len(next(iter(cols.values()))) if cols else 0
        rows = [{role: cols[role][i] for role in cols} for i in range(n)]
        if self.split is not None:
            rows = [r for r in rows if is_eval_row(self.fmt, r) == (self.split == "eval")]
        return rows

    def encode(self, rows: list[dict[str, Any]]) -> list[tuple[list[int], list[int]]]:
        if self.model_id is None and self.fmt != formats.CHAT:  # bytes: no tokenizer to load (what it would give)
            return [self.encode_bytes(r) for r in rows]
        tok = self.tokenizer
        eos = tok.eos_token_id
        if self.fmt == formats.PROMPT_COMPLETION:
            prompts, completions = [r["prompt"] for r in rows], [r["completion"] for r in rows]
            return formats.encode_prompt_completion(tok, prompts, completions, self.template, eos)
        if self.fmt == formats.CHAT:
            return formats.encode_chat(tok, [r["messages"] for r in rows], eos)
        return formats.encode_text(tok, [str(r["text"]) for r in rows], eos)

    def encode_bytes(self, row: dict[str, Any]) -> tuple[list[int], list[int]]:
        """A text or prompt/completion row in byte tokens, as :func:`byte_tokenizer` would tokenize it (its ids
        are the UTF-8 bytes), without loading it: the driver packs the learnable corpus this way in a second."""
        if self.fmt == formats.PROMPT_COMPLETION:
            head = byte_encode(formats.render_prompt(self.template, row["prompt"]))
            tail = byte_encode(str(row["completion"])) + [BYTE_EOS]
            return head + tail, [formats.IGNORE] * len(head) + tail
        ids = byte_encode(str(row["text"])) + [BYTE_EOS]
        return ids, list(ids)

    def pack(self, rows: list[dict[str, Any]]) -> tuple[list[list[int]], list[list[int]]]:
        ids: list[int] = []
        labels: list[int] = []
        for i, lab in self.encode(rows) if rows else []:
            ids.extend(i)
            labels.extend(lab)
        n, s = len(ids) // self.seq_len, self.seq_len
        return [ids[k * s : (k + 1) * s] for k in range(n)], [labels[k * s : (k + 1) * s] for k in range(n)]

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        ids, labels = self.pack(self.rows(batch))
        shape = (len(ids), self.seq_len)
        return {
            "input_ids": np.asarray(ids, dtype=np.int64).reshape(shape),
            "labels": np.asarray(labels, dtype=np.int64).reshape(shape),
        }


def is_eval_row(fmt: str, row: dict[str, Any]) -> bool:
    """Held out for evaluation? Decided by the row's own text (:func:`.formats.row_key`)."""
    return formats.is_eval_key(formats.row_key(fmt, row), EVAL_EVERY_NTH)


# ---- Ray Datasets (the job's driver) ------------------------------------------------------------------------------
#: The learnable corpus is packed in this many blocks.
LEARNABLE_BLOCKS = 2


def build_datasets(cfg: JobConfig, model_dir: str | None, vocab_size: int) -> dict[str, Any]:
    """``{"train": Dataset}`` of packed ``input_ids`` and ``labels`` rows for ``cfg.data`` (the held-out rows:
    :func:`eval_rows`).

    ``model_dir``: the resolved ``model_id`` on the driver (its tokenizer is used when it has one; the Ray Data
    tasks resolve ``model_id`` again on their own node)."""
    import numpy as np

    source = cfg.data or LEARNABLE
    workers = int(cfg.num_workers or 1)
    if source == RANDOM:
        need = int(cfg.steps) * int(cfg.batch_size) * workers
        shape = (max(need, 1), int(cfg.seq_len))
        ids = np.random.default_rng(int(cfg.seed)).integers(0, vocab_size, shape, dtype=np.int64)
        return {"train": driver_rows(ids, workers)}
    if source == LEARNABLE:
        blocks = learnable_blocks(cfg, model_dir, "train")
        ids, labels = (np.concatenate([b[k] for b in blocks]) for k in ("input_ids", "labels"))
        return {"train": driver_rows(ids, workers, labels)}
    return {"train": _packed(cfg, model_dir, "train")}


def learnable_blocks(cfg: JobConfig, model_dir: str | None, split: str) -> list[dict[str, Any]]:
    """The learnable corpus packed for ``split`` as prompt/completion rows, block by block (``LEARNABLE_BLOCKS``
    equal parts of its rows): a packed row is cut from one block's rows, as Ray Data cuts a file's from one block."""
    own = has_tokenizer(model_dir)
    packer = RowPacker(
        int(cfg.seq_len), cfg.model_id, has_own_tokenizer=own, split=split, fmt=formats.PROMPT_COMPLETION
    )
    rows = learnable_rows(int(cfg.seed))
    n, k = len(rows), LEARNABLE_BLOCKS
    blocks = [rows[i * n // k : (i + 1) * n // k] for i in range(k)]
    return [packer({c: [r[c] for r in blk] for c in ("prompt", "completion")}) for blk in blocks]


def driver_rows(rows, workers: int, labels=None):
    """Rows the driver made (int64, ``[rows, seq_len]``; ``labels`` alike, or None: every token trained on) as a
    Ray Dataset that Ray Train splits without running a task: ``from_items`` builds the blocks in this process and
    puts them in the object store (``from_numpy`` or a map operator would run tasks, each starting a Python process
    on a small machine), and there is one block per worker, each exactly its share, so the equal split has no
    block to slice (the remainder it would drop is dropped here)."""
    import ray.data

    workers = max(1, workers)
    keep = len(rows) - len(rows) % workers if len(rows) >= workers else len(rows)
    items = [
        {"input_ids": rows[i]} if labels is None else {"input_ids": rows[i], "labels": labels[i]} for i in range(keep)
    ]
    return ray.data.from_items(items, override_num_blocks=max(1, min(workers, keep)))


def eval_rows(cfg: JobConfig, model_dir: str | None, vocab_size: int):
    """The held-out rows every evaluation reads, made once by the driver: ``{"input_ids", "labels"}`` (int64,
    ``[rows, seq_len]``), at most ``EVAL_MAX_BATCHES`` batches for each rank. ``learnable``: packed here, block
    by block like the train split; files, S3 and the Hub: the first held-out rows Ray Data packs; ``random``:
    seeded random ids, every token trained on."""
    import numpy as np

    source = cfg.data or LEARNABLE
    seq_len, batch = int(cfg.seq_len), int(cfg.batch_size)
    rows = EVAL_MAX_BATCHES * batch * int(cfg.num_workers or 1)
    if source == RANDOM:
        ids = np.random.default_rng(int(cfg.seed) + 1).integers(0, vocab_size, (rows, seq_len), dtype=np.int64)
        return {"input_ids": ids, "labels": ids}
    if source == LEARNABLE:
        blocks = learnable_blocks(cfg, model_dir, "eval")
        return {k: np.concatenate([b[k] for b in blocks])[:rows] for k in ("input_ids", "labels")}
    got = _packed(cfg, model_dir, "eval").limit(rows).take_all()
    return {
        k: np.asarray([r[k] for r in got], dtype=np.int64).reshape(len(got), seq_len) for k in ("input_ids", "labels")
    }


def rank_rows(rows, rank: int, world: int):
    """This rank's share of the held-out rows (an array, or a dict of equal arrays): equal shares (a remainder is
    left out), so every rank evaluates the same number of batches and their losses are averaged by one all-reduce."""
    if isinstance(rows, dict):
        return {k: rank_rows(v, rank, world) for k, v in rows.items()}
    per = len(rows) // world
    return rows[rank * per : (rank + 1) * per]


def _packed(cfg: JobConfig, model_dir: str | None, split: str):
    """``cfg.data`` read (:func:`.sources.read_source`), tokenized in its form and packed to ``seq_len`` rows,
    keeping ``split``'s rows (see :func:`is_eval_row`)."""
    ds, fmt = sources.read_source(cfg.data, cfg.data_format, cfg.data_columns)
    own = has_tokenizer(model_dir)
    packer = RowPacker(
        int(cfg.seq_len),
        cfg.model_id,
        has_own_tokenizer=own,
        split=split,
        fmt=fmt,
        columns=cfg.data_columns,
        template=cfg.prompt_template,
    )
    # whole blocks: a row is cut from the texts of one batch, and the held-out texts of a few hundred short lines
    # hold fewer tokens than one row of a long seq_len (2048: no eval row at all); num_cpus=0: the training workers
    # hold the worker nodes' CPUs, and this work is light
    return ds.map_batches(packer, batch_size=None, batch_format="numpy", num_cpus=0)


def data_config():
    """Ray Train's DataConfig: the train dataset split, order preserved, no locality hints (deterministic shards)."""
    from ray.data import ExecutionOptions
    from ray.train import DataConfig

    return DataConfig(execution_options=ExecutionOptions(preserve_order=True), enable_shard_locality=False)


# ---- the worker's side ---------------------------------------------------------------------------------------------
def digest(batch) -> str:
    """A short fingerprint of one batch: its ids, or its (ids, labels) (to check shards are disjoint and resume
    neither repeats nor skips)."""
    parts = batch if isinstance(batch, tuple) else (batch,)
    return hashlib.sha1(b"".join(t.cpu().numpy().tobytes() for t in parts)).hexdigest()[:12]


class ShardReader:
    """Batches of this rank's shard from a position (epoch, batch): a new epoch starts when the shard ends.

    ``iter_epoch(epoch)`` must give the same batches in the same order each time it is called for the same
    epoch (true for Ray Train shards with order preserved; a plain list in tests).

    :meth:`prefetch` opens the epoch's iterator and fetches its first batch in a background thread, so that
    Ray Data starts its executor (a coordinator actor, on a small machine a new Python process) while the
    caller builds the model; :meth:`next` takes that iterator over, batches in the same order.
    """

    def __init__(self, iter_epoch, epoch: int = 0, batch: int = 0):
        self.iter_epoch = iter_epoch
        self.epoch, self.batch = int(epoch), int(batch)
        self.skipped: list[str] = []
        self._it: Iterator | None = None
        self._ahead: threading.Thread | None = None
        self._opened: dict[str, Any] = {}

    def position(self) -> dict[str, int]:
        return {"epoch": self.epoch, "batch": self.batch}

    def prefetch(self) -> ShardReader:
        """Open the current epoch's iterator and fetch its first batch in a background thread (once); the reader."""
        if self._ahead is not None or self._it is not None:
            return self
        epoch, opened = self.epoch, self._opened

        def fetch() -> None:
            try:
                it = iter(self.iter_epoch(epoch))
                opened.update(epoch=epoch, it=it, first=[next(it)])
            except StopIteration:
                opened.update(epoch=epoch, it=iter(()), first=[])
            except BaseException as e:  # noqa: BLE001 - raised again by next(), in the training thread
                opened.update(epoch=epoch, error=e)

        self._ahead = threading.Thread(target=fetch, name="raytrain-first-batch", daemon=True)
        self._ahead.start()
        return self

    def _open(self) -> Iterator:
        """The iterator of the current epoch: the prefetched one when it was opened for this epoch."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.join()
            opened, self._opened = self._opened, {}
            if "error" in opened:
                raise opened["error"]
            if opened["epoch"] == self.epoch:
                return itertools.chain(opened["first"], opened["it"])
        return iter(self.iter_epoch(self.epoch))

    def next(self):
        for _ in range(2):  # at most one epoch boundary per call
            if self._it is None:
                self._it = self._open()
                for _ in range(self.batch):  # consumed before the checkpoint we resumed from
                    self.skipped.append(digest(_ids(next(self._it))))  # as TrainLog records a step: its ids
            try:
                pair = _pair(next(self._it))
            except StopIteration:
                if self.batch == 0:
                    raise ValueError("this rank's data shard is empty: more data, or a smaller batch_size") from None
                self._it, self.epoch, self.batch = None, self.epoch + 1, 0
                continue
            self.batch += 1
            return pair
        raise ValueError("this rank's data shard is empty")  # pragma: no cover - guarded above


def _ids(batch):
    return _pair(batch)[0]


def _pair(batch):
    """(input_ids, labels) of a batch: a dict of Ray Data columns (no ``labels``: every token trained on), an
    (ids, labels) pair, or bare ids."""
    if isinstance(batch, dict):
        return batch["input_ids"], batch.get("labels", batch["input_ids"])
    if isinstance(batch, tuple):
        return batch
    return batch, batch
