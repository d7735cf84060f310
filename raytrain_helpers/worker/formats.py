"""The forms training data comes in, and which tokens of each the loss is computed on.

``train.data_format`` (``auto`` picks it from the columns the source has, after ``train.data_columns``):

- ``text``: a ``text`` column; every token is trained on (the loss of plain language modelling).
- ``prompt_completion``: ``prompt`` and ``completion`` columns; the prompt (rendered with ``train.prompt_template``)
  is context only: its tokens' labels are :data:`IGNORE`, so the loss is the completion's alone, EOS included.
- ``chat``: a ``messages`` column (a list of ``{"role": ..., "content": ...}``), rendered with the model's own chat
  template (``tokenizer.apply_chat_template``); only the assistant turns are trained on, the system and user turns
  and the template's headers are context.

Masking is done on characters, then mapped to tokens: the text is rendered whole and tokenized once with the fast
tokenizer's ``offset_mapping``, and a token is trained on when its first character lies in a trained span (the
completion; an assistant turn's text after the template's generation prompt). So a BPE merge across a span's edge
cannot shift the mask, and any chat template that renders a conversation's prefixes as prefixes works.

Every encoder returns ``(input_ids, labels)`` of equal length; ``transformers``' causal LM loss shifts the labels by
one itself and ignores :data:`IGNORE` (``-100``, PyTorch's ``CrossEntropyLoss(ignore_index=-100)`` default).

Runs in the job (Ray Data tasks and the driver): standard library only at import time.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

TEXT = "text"
PROMPT_COMPLETION = "prompt_completion"
CHAT = "chat"
AUTO = "auto"
FORMATS = (TEXT, PROMPT_COMPLETION, CHAT)
#: The label of a token the loss ignores (PyTorch's and transformers' ignore_index).
IGNORE = -100
#: The columns each format reads (their names in the source may differ: ``train.data_columns``).
COLUMNS: dict[str, tuple[str, ...]] = {
    TEXT: ("text",),
    PROMPT_COMPLETION: ("prompt", "completion"),
    CHAT: ("messages",),
}
#: ``auto``: the first format whose columns the source has, in this order.
AUTO_ORDER = (CHAT, PROMPT_COMPLETION, TEXT)


class DataFormatError(ValueError):
    """The data does not have the form ``train.data_format`` asks for (the message names the setting and the fix)."""


def source_columns(fmt: str, mapping: Mapping[str, str] | None) -> dict[str, str]:
    """``{role: column in the source}`` of ``fmt``: ``train.data_columns`` renames, the rest keep their names."""
    mapping = dict(mapping or {})
    return {role: mapping.get(role, role) for role in COLUMNS[fmt]}


def pick_format(fmt: str, available: Sequence[str], mapping: Mapping[str, str] | None, source: str) -> str:
    """The format of a source with columns ``available``: ``fmt`` when its columns are there, else an error naming
    the missing column and the fix; ``auto`` = the first of :data:`AUTO_ORDER` whose columns are all there."""
    have = set(available)
    if fmt == AUTO:
        for f in AUTO_ORDER:
            if set(source_columns(f, mapping).values()) <= have:
                return f
        wanted = " or ".join("+".join(f"`{c}`" for c in source_columns(f, mapping).values()) for f in AUTO_ORDER)
        raise DataFormatError(
            f"train.data = {source!r} has the columns {sorted(have)}, none of the forms the tutorial reads "
            f"({wanted}). Fix: rename the columns with train.data_columns (e.g. {{prompt: question, completion: "
            "answer}), or set train.data_format to the form your data is in"
        )
    if fmt not in FORMATS:
        raise DataFormatError(f"train.data_format = {fmt!r} is not one of {AUTO}, {', '.join(FORMATS)}")
    missing = [c for c in source_columns(fmt, mapping).values() if c not in have]
    if missing:
        raise DataFormatError(
            f"train.data = {source!r} has no column {', '.join(map(repr, missing))} (it has {sorted(have)}), which "
            f"train.data_format = {fmt} reads. Fix: name your columns in train.data_columns (e.g. "
            f"{{{COLUMNS[fmt][0]}: your_column}}), or set train.data_format to the form your data is in"
        )
    return fmt


def row_key(fmt: str, row: Mapping[str, Any]) -> str:
    """The text a row is known by (its held-out decision hashes it): the same row gives the same key everywhere."""
    if fmt == TEXT:
        return str(row["text"])
    if fmt == PROMPT_COMPLETION:
        return f"{row['prompt']}\x1f{row['completion']}"
    return json.dumps(_messages(row["messages"]), sort_keys=True, ensure_ascii=False)


def is_eval_key(key: str, every: int) -> bool:
    """Held out for evaluation? Decided by the row's own text, so the same row is never in both splits."""
    return zlib.crc32(key.encode("utf-8")) % every == 0


def encode_text(tok, texts: Sequence[str], eos: int | None) -> list[tuple[list[int], list[int]]]:
    """Plain text: every token trained on, EOS after each text."""
    enc = tok(list(texts), add_special_tokens=False)["input_ids"]
    tail = [eos] if eos is not None else []
    return [(list(ids) + tail, list(ids) + tail) for ids in enc]


def encode_prompt_completion(
    tok, prompts: Sequence[str], completions: Sequence[str], template: str, eos: int | None
) -> list[tuple[list[int], list[int]]]:
    """The prompt (through ``template``) as context, the completion and EOS trained on."""
    heads = [render_prompt(template, p) for p in prompts]
    fulls = [h + str(c) for h, c in zip(heads, completions, strict=True)]
    return [
        _masked(ids, offsets, [(len(h), len(f))], eos, eos_trained=True)
        for h, f, (ids, offsets) in zip(heads, fulls, _offsets(tok, fulls), strict=True)
    ]


def encode_chat(tok, conversations: Sequence[Any], eos: int | None) -> list[tuple[list[int], list[int]]]:
    """Each conversation through the tokenizer's chat template; only the assistant turns trained on."""
    if not getattr(tok, "chat_template", None):
        raise DataFormatError(
            "train.data_format = chat, but the model's tokenizer has no chat template. Fix: a model_id whose "
            "tokenizer_config.json has a chat_template (an -Instruct model), or data_format: prompt_completion"
        )
    texts, spans = [], []
    for conv in conversations:
        text, trained = assistant_spans(tok, _messages(conv))
        texts.append(text)
        spans.append(trained)
    return [
        _masked(ids, offsets, s, eos, eos_trained=False)
        for s, (ids, offsets) in zip(spans, _offsets(tok, texts), strict=True)
    ]


def render_prompt(template: str, prompt: Any) -> str:
    """``train.prompt_template`` filled with the prompt (``{prompt}``)."""
    return template.replace("{prompt}", str(prompt))


def assistant_spans(tok, messages: list[dict[str, str]]) -> tuple[str, list[tuple[int, int]]]:
    """The conversation rendered by the chat template, and the character spans of its assistant replies (each from
    the end of the template's generation prompt to the end of the turn, its end-of-turn marker included)."""

    def render(msgs, gen=False) -> str:
        return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen) if msgs else ""

    full = render(messages)
    spans = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        start, end = len(render(messages[:i], gen=True)), len(render(messages[: i + 1]))
        if not (full.startswith(render(messages[: i + 1])) and start <= end):
            raise DataFormatError(
                "train.data_format = chat: the model's chat template does not render a conversation's beginning as "
                "the beginning of the whole, so the assistant turns cannot be found. Fix: data_format: "
                "prompt_completion with the prompt rendered by you"
            )
        spans.append((start, end))
    return full, spans


def _messages(conv: Any) -> list[dict[str, str]]:
    """A ``messages`` cell as a list of {role, content} dicts (Arrow gives lists of dicts, or numpy arrays)."""
    if isinstance(conv, str):
        conv = json.loads(conv)
    out = [{"role": str(m["role"]), "content": str(m["content"])} for m in list(conv)]
    if not out:
        raise DataFormatError("train.data_format = chat: a row has an empty `messages` list. Fix: drop such rows")
    return out


def _offsets(tok, texts: list[str]):
    enc = tok(texts, add_special_tokens=False, return_offsets_mapping=True)
    return list(zip(enc["input_ids"], enc["offset_mapping"], strict=True))


def _masked(ids, offsets, spans, eos: int | None, *, eos_trained: bool) -> tuple[list[int], list[int]]:
    """``(ids + [eos], labels)``: a token is trained on when its first character is inside one of ``spans``."""
    ids = list(ids)
    labels = [i if any(a <= off[0] < b for a, b in spans) else IGNORE for i, off in zip(ids, offsets, strict=True)]
    if eos is not None:
        ids.append(eos)
        labels.append(eos if eos_trained else IGNORE)
    return ids, labels
