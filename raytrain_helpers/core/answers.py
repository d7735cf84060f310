"""The held-out metric 06 scores: is a generated completion the expected answer?

One rule for every prompt/completion task the tutorial scores:

- an expected completion holding ``####`` (GSM8K's convention: the worked solution, then ``#### <final answer>``)
  is right when the generation's own ``#### ...`` line carries the same final answer: numbers compared as numbers
  after dropping thousands separators, a leading ``$`` and a trailing ``.`` (``1,000`` = ``1000`` = ``1000.0``);
  a generation without ``####`` is wrong, however close its arithmetic;
- any other expected completion (the learnable language's next letters) is right when the generation starts with
  it exactly.

Exact and automatic: no judge model, no partial credit.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

MARK = "####"


def final_answer(text: str) -> str | None:
    """The answer after the first ``####`` of ``text`` (its first line, normalised), None without one."""
    if MARK not in text:
        return None
    tail = text.split(MARK, 1)[1].strip().splitlines()
    return normalise(tail[0]) if tail else ""


def normalise(answer: str) -> str:
    """A final answer as compared: no spaces, thousands separators, leading ``$`` or trailing ``.``; a number in
    its canonical decimal form (``7.50`` -> ``7.5``, ``1,000`` -> ``1000``)."""
    a = re.sub(r"\s+", "", answer).replace(",", "").lstrip("$").rstrip(".")
    try:
        d = Decimal(a)
    except InvalidOperation:
        return a
    return format(d.normalize(), "f")


def matches(generated: str, expected: str) -> bool:
    """Is ``generated`` the ``expected`` completion by the rule above?"""
    want = final_answer(expected)
    if want is not None:
        return final_answer(generated) == want
    return bool(expected) and generated.startswith(expected)
