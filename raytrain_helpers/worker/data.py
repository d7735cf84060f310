"""The training data, through Ray Data: sources, tokenizers, packing, the held-out split, each worker's shard.

Sources (``train.data``):

- ``learnable`` — the alphabet language the tutorial writes itself: each line is a run of consecutive letters,
  wrapping from z to a (``klmnopq``), of random start and length. The next letter follows from the current one,
  so even the tiny model's loss falls within a few steps, and a held-out prompt has one right continuation.
- a local ``.txt`` / ``.jsonl`` / ``.parquet`` file or a folder of them (``.jsonl`` and ``.parquet`` need a
  ``text`` column); on aws an ``s3://`` prefix, read by every node.
- ``random`` — uniformly random token ids, for throughput benchmarks only (nothing can be learned).

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
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

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
TEXT_EXTENSIONS = (".txt", ".jsonl", ".json", ".parquet")


# ---- the learnable corpus ---------------------------------------------------------------------------------------
def alphabet_line(rng: random.Random) -> str:
    """One line of the alphabet language: 8 to 26 consecutive letters from a random start."""
    start, n = rng.randrange(26), rng.randrange(8, 27)
    return "".join(ALPHABET[(start + i) % 26] for i in range(n))


def learnable_lines(seed: int, n: int = LEARNABLE_LINES) -> list[str]:
    rng = random.Random(f"learnable-{seed}")
    return [alphabet_line(rng) for _ in range(n)]


def is_eval(text: str) -> bool:
    """Held out for evaluation? Decided by the text itself, so the same text is never in both splits."""
    return zlib.crc32(text.encode("utf-8")) % EVAL_EVERY_NTH == 0


def held_out_prompts(seed: int, n: int = 20, prompt_len: int = 4, answer_len: int = 4) -> list[tuple[str, str]]:
    """(prompt, expected continuation) pairs cut from held-out lines of the learnable corpus (lines no training
    row holds, see :func:`is_eval`), in a fixed order: every window of ``prompt_len + answer_len`` letters of
    those lines, each once. The language has one window per start letter (26), so n is at most 26."""
    seen: dict[str, None] = {}
    width = prompt_len + answer_len
    for line in learnable_lines(seed):
        if is_eval(line):
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


class TextPacker:
    """Tokenizes texts (each followed by EOS) and cuts the stream into rows of exactly ``seq_len`` ids.

    The tail that does not fill a row is dropped (per batch of texts). Used by Ray Data's ``map_batches``, where
    it also selects the split (one operator instead of a filter and a map: on a small machine each operator's
    first tasks start Python processes, which costs more than the work itself).
    """

    def __init__(
        self, seq_len: int, model_id: str | None = None, *, has_own_tokenizer: bool = False, split: str | None = None
    ):
        self.seq_len = int(seq_len)
        self.model_id = model_id if has_own_tokenizer else None  # resolved where the batch is tokenized
        self.split = split  # "train" | "eval": keep only that split's texts (see is_eval); None: keep all
        self._tok = None

    def encode(self, text: str) -> list[int]:
        if self.model_id is None:
            return byte_encode(text) + [BYTE_EOS]
        if self._tok is None:
            from transformers import AutoTokenizer

            self._tok = AutoTokenizer.from_pretrained(resolve_config_dir(self.model_id))  # no weights
        eos = [self._tok.eos_token_id] if self._tok.eos_token_id is not None else []
        return list(self._tok(text, add_special_tokens=False)["input_ids"]) + eos

    def pack(self, texts: Iterable[str]) -> list[list[int]]:
        stream: list[int] = []
        for t in texts:
            stream.extend(self.encode(str(t)))
        n = len(stream) // self.seq_len
        return [stream[i * self.seq_len : (i + 1) * self.seq_len] for i in range(n)]

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        texts = [str(t) for t in batch["text"]]
        if self.split is not None:
            texts = [t for t in texts if is_eval(t) == (self.split == "eval")]
        rows = self.pack(texts)
        return {"input_ids": np.asarray(rows, dtype=np.int64).reshape(len(rows), self.seq_len)}


# ---- Ray Datasets (the job's driver) ------------------------------------------------------------------------------
#: The learnable corpus is packed in this many blocks.
LEARNABLE_BLOCKS = 2


def build_datasets(cfg: JobConfig, model_dir: str | None, vocab_size: int) -> dict[str, Any]:
    """``{"train": Dataset}`` of packed ``input_ids`` rows for ``cfg.data`` (the held-out rows: :func:`eval_rows`).

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
        rows = np.concatenate(learnable_blocks(cfg, model_dir, "train"))
        return {"train": driver_rows(rows, workers)}
    return {"train": _packed(read_texts(source), cfg, model_dir, "train")}


def learnable_blocks(cfg: JobConfig, model_dir: str | None, split: str) -> list:
    """The learnable corpus packed for ``split``, block by block (``LEARNABLE_BLOCKS`` equal parts of its lines):
    a row is cut from one block's texts, as Ray Data cuts a file's rows from one block."""
    packer = TextPacker(int(cfg.seq_len), cfg.model_id, has_own_tokenizer=has_tokenizer(model_dir), split=split)
    lines = learnable_lines(int(cfg.seed))
    n, k = len(lines), LEARNABLE_BLOCKS
    return [packer({"text": lines[i * n // k : (i + 1) * n // k]})["input_ids"] for i in range(k)]


def driver_rows(rows, workers: int):
    """Rows the driver made (int64, ``[rows, seq_len]``) as a Ray Dataset of ``input_ids`` that Ray Train splits
    without running a task: ``from_items`` builds the blocks in this process and puts them in the object store
    (``from_numpy`` or a map operator would run tasks, each starting a Python process on a small machine), and
    there is one block per worker, each exactly its share, so the equal split has no block to slice (the remainder
    it would drop is dropped here)."""
    import ray.data

    workers = max(1, workers)
    rows = rows[: len(rows) - len(rows) % workers] if len(rows) >= workers else rows
    return ray.data.from_items([{"input_ids": r} for r in rows], override_num_blocks=max(1, min(workers, len(rows))))


def eval_rows(cfg: JobConfig, model_dir: str | None, vocab_size: int):
    """The held-out rows every evaluation reads (int64, ``[rows, seq_len]``), made once by the driver: at most
    ``EVAL_MAX_BATCHES`` batches for each rank. ``learnable``: packed here, block by block like the train split;
    files and S3: the first held-out rows Ray Data packs; ``random``: seeded random ids."""
    import numpy as np

    source = cfg.data or LEARNABLE
    seq_len, batch = int(cfg.seq_len), int(cfg.batch_size)
    rows = EVAL_MAX_BATCHES * batch * int(cfg.num_workers or 1)
    if source == RANDOM:
        return np.random.default_rng(int(cfg.seed) + 1).integers(0, vocab_size, (rows, seq_len), dtype=np.int64)
    if source == LEARNABLE:
        return np.concatenate(learnable_blocks(cfg, model_dir, "eval"))[:rows]
    got = _packed(read_texts(source), cfg, model_dir, "eval").limit(rows).take_all()
    return np.asarray([r["input_ids"] for r in got], dtype=np.int64).reshape(len(got), seq_len)


def rank_rows(rows, rank: int, world: int):
    """This rank's share of the held-out rows: equal shares (a remainder is left out), so every rank evaluates the
    same number of batches and their losses are averaged by one all-reduce."""
    per = len(rows) // world
    return rows[rank * per : (rank + 1) * per]


def _packed(texts, cfg: JobConfig, model_dir: str | None, split: str):
    """``texts`` tokenized and packed to ``seq_len`` rows, keeping ``split``'s texts (see :func:`is_eval`)."""
    own = has_tokenizer(model_dir)
    packer = TextPacker(int(cfg.seq_len), cfg.model_id, has_own_tokenizer=own, split=split)
    # whole blocks: a row is cut from the texts of one batch, and the held-out texts of a few hundred short lines
    # hold fewer tokens than one row of a long seq_len (2048: no eval row at all); num_cpus=0: the training workers
    # hold the worker nodes' CPUs, and this work is light
    return texts.map_batches(packer, batch_size=None, batch_format="numpy", num_cpus=0)


def read_texts(source: str):
    """A Ray Dataset with one ``text`` column from a file or folder (local or s3://)."""
    import ray.data

    zero = {"ray_remote_args": {"num_cpus": 0}}
    low = source.rstrip("/").lower()
    if low.endswith(".txt"):
        return ray.data.read_text(source, **zero)
    if low.endswith((".jsonl", ".json")):
        return ray.data.read_json(source, lines=low.endswith(".jsonl"), **zero).select_columns(["text"], num_cpus=0)
    if low.endswith(".parquet"):
        return ray.data.read_parquet(source, columns=["text"], **zero)
    ext = _folder_extension(source)
    if ext == ".txt":
        return ray.data.read_text(source, file_extensions=["txt"], **zero)
    if ext in (".jsonl", ".json"):
        return ray.data.read_json(source, file_extensions=[ext[1:]], lines=ext == ".jsonl", **zero).select_columns(
            ["text"], num_cpus=0
        )
    return ray.data.read_parquet(source, columns=["text"], file_extensions=["parquet"], **zero)


def _folder_extension(source: str) -> str:
    if source.startswith("s3://"):
        import pyarrow.fs

        fs, path = pyarrow.fs.FileSystem.from_uri(source)
        names = [i.path for i in fs.get_file_info(pyarrow.fs.FileSelector(path, recursive=True)) if i.is_file]
    else:
        names = [os.path.join(d, f) for d, _, fs_ in os.walk(source) for f in fs_]
    exts = sorted({os.path.splitext(n)[1].lower() for n in names} & set(TEXT_EXTENSIONS))
    if len(exts) != 1:
        raise ValueError(
            f"train.data = {source!r}: expected files of one kind ({', '.join(TEXT_EXTENSIONS)}), found "
            f"{exts or 'none'}. Fix: point train.data at one file or a folder of one kind"
        )
    return exts[0]


def data_config():
    """Ray Train's DataConfig: the train dataset split, order preserved, no locality hints (deterministic shards)."""
    from ray.data import ExecutionOptions
    from ray.train import DataConfig

    return DataConfig(execution_options=ExecutionOptions(preserve_order=True), enable_shard_locality=False)


# ---- the worker's side ---------------------------------------------------------------------------------------------
def digest(ids) -> str:
    """A short fingerprint of one batch (to check shards are disjoint and resume neither repeats nor skips)."""
    return hashlib.sha1(ids.cpu().numpy().tobytes()).hexdigest()[:12]


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
                    self.skipped.append(digest(_ids(next(self._it))))
            try:
                ids = _ids(next(self._it))
            except StopIteration:
                if self.batch == 0:
                    raise ValueError("this rank's data shard is empty: more data, or a smaller batch_size") from None
                self._it, self.epoch, self.batch = None, self.epoch + 1, 0
                continue
            self.batch += 1
            return ids
        raise ValueError("this rank's data shard is empty")  # pragma: no cover - guarded above


def _ids(batch):
    return batch["input_ids"] if isinstance(batch, dict) else batch
