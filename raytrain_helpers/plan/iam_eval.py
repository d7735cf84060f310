"""A small evaluator of one identity policy document, enough to decide S3 requests of the storage role.

How a request (action, resource, condition keys) is decided, as the IAM User Guide's "Policy evaluation logic"
and "IAM JSON policy elements: Condition operators" describe it (checked 2026-12-04):

* an explicit ``Deny`` that matches wins; else an ``Allow`` that matches allows; else it is denied implicitly;
* a statement matches when its ``Action`` (or not its ``NotAction``) matches the action - case-insensitive,
  ``*`` any run of characters, ``?`` one - and its ``Resource`` (or not its ``NotResource``) matches the
  resource ARN (case-sensitive, same wildcards), and every condition holds;
* conditions: every operator of the block and every key under it must hold (AND); the values listed for one key
  are alternatives (OR). ``StringEquals``/``StringLike`` (``*``/``?`` wildcards) hold when the request's value
  equals/matches one of them; a key absent from the request makes them fail. ``StringNotEquals``/
  ``StringNotLike`` hold when no value equals/matches, and hold when the key is absent. The ``...IfExists``
  forms hold when the key is absent. ``Null``: ``"true"`` holds when the key is absent, ``"false"`` when it is
  present. Keys are compared case-insensitively, values case-sensitively.
* any other operator (numeric, date, ARN, ``ForAnyValue:``...) raises ``ValueError``: never guessed.

Only one identity policy: no resource policy, permissions boundary, SCP or session policy (the storage role has
none of them).
"""

from __future__ import annotations

import re
from typing import Any

ALLOW, EXPLICIT_DENY, IMPLICIT_DENY = "Allow", "ExplicitDeny", "ImplicitDeny"
_STRING_OPS = {"StringEquals", "StringNotEquals", "StringLike", "StringNotLike"}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def wildcard_match(pattern: str, text: str, *, case: bool = True) -> bool:
    """IAM's ``*``/``?`` wildcard match of the whole ``text``."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text, 0 if case else re.IGNORECASE) is not None


def _op_holds(op: str, wanted: list[str], present: bool, value: str) -> bool:
    base, if_exists = (op[: -len("IfExists")], True) if op.endswith("IfExists") else (op, False)
    if base == "Null":
        return all((str(w).lower() == "true") != present for w in wanted)
    if base not in _STRING_OPS:
        raise ValueError(f"condition operator {op!r} is not evaluated here")
    if not present:
        return if_exists or base.startswith("StringNot")
    if base in ("StringEquals", "StringNotEquals"):
        hit = any(str(w) == value for w in wanted)
    else:
        hit = any(wildcard_match(str(w), value) for w in wanted)
    return hit if base in ("StringEquals", "StringLike") else not hit


def conditions_hold(block: dict[str, Any], context: dict[str, str]) -> bool:
    """Every operator and key of a statement's ``Condition`` block holds for the request's ``context``."""
    ctx = {k.lower(): v for k, v in context.items()}
    for op, keys in (block or {}).items():
        for key, wanted in keys.items():
            present = key.lower() in ctx
            if not _op_holds(op, [str(w) for w in _as_list(wanted)], present, ctx.get(key.lower(), "")):
                return False
    return True


def _matches(st: dict[str, Any], action: str, resource: str, context: dict[str, str]) -> bool:
    if "Action" in st:
        acts = any(wildcard_match(str(a), action, case=False) for a in _as_list(st["Action"]))
    else:
        acts = not any(wildcard_match(str(a), action, case=False) for a in _as_list(st.get("NotAction", [])))
    if "Resource" in st:
        res = any(wildcard_match(str(r), resource) for r in _as_list(st["Resource"]))
    else:
        res = not any(wildcard_match(str(r), resource) for r in _as_list(st.get("NotResource", [])))
    return acts and res and conditions_hold(st.get("Condition") or {}, context)


def decide(policy: dict[str, Any], action: str, resource: str, context: dict[str, str] | None = None) -> str:
    """:data:`ALLOW`, :data:`EXPLICIT_DENY` or :data:`IMPLICIT_DENY` for one request under ``policy``."""
    ctx = context or {}
    matching = [st for st in _as_list(policy.get("Statement") or []) if _matches(st, action, resource, ctx)]
    if any(st.get("Effect") == "Deny" for st in matching):
        return EXPLICIT_DENY
    return ALLOW if any(st.get("Effect") == "Allow" for st in matching) else IMPLICIT_DENY


__all__ = ["ALLOW", "EXPLICIT_DENY", "IMPLICIT_DENY", "conditions_hold", "decide", "wildcard_match"]
