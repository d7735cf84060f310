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
  present. ``Bool`` holds when the request's value is one of the listed ``"true"``/``"false"`` (case-insensitive),
  and fails when the key is absent (``BoolIfExists`` then holds): the form of S3's ``aws:SecureTransport`` deny.
  Keys are compared case-insensitively, values case-sensitively.
* any other operator (numeric, date, ARN, ``ForAnyValue:``...) raises ``ValueError``: never guessed.
* policy variables (IAM User Guide, "IAM policy elements: Variables and tags",
  docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_variables.html, read 2026-12-05 in its English
  (docs.amazonaws.cn/en_us/...md: the note, the list of sections) and Japanese (the introduction) versions):
  when the policy is evaluated, each ``${key}`` is replaced by the value of ``key`` in the request's context (a
  principal's tag is the key ``aws:PrincipalTag/<tag-key>``, the form the Amazon EKS User Guide gives for Pod
  Identity's session tags; keys case-insensitive like every condition key here), here in a ``Resource`` and in a
  string condition's values. "If AWS cannot resolve a variable this might cause the entire statement to be
  invalid": a statement whose variable has no value matches nothing. This evaluator matches a substituted value
  literally (the namespaces it is used for hold neither ``*`` nor ``?``). Default values and escapes of special
  characters are not evaluated (``ValueError``): the tutorial's policies use neither.
"""

from __future__ import annotations

import re
from typing import Any

ALLOW, EXPLICIT_DENY, IMPLICIT_DENY = "Allow", "ExplicitDeny", "ImplicitDeny"
_STRING_OPS = {"StringEquals", "StringNotEquals", "StringLike", "StringNotLike"}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


VARIABLE = re.compile(r"\$\{([^}]*)\}")


class Unresolved(Exception):
    """A policy variable without a value in the request context (its statement matches nothing)."""


def _pattern(pattern: str, context: dict[str, str] | None, *, wild: bool = True) -> str:
    """The regex of an IAM pattern: ``*``/``?`` wildcards (``wild``) outside variables, each variable's value
    literal; without ``context`` no variable is replaced."""
    ctx = {k.lower(): v for k, v in (context or {}).items()}
    out, pos = [], 0
    for m in VARIABLE.finditer(pattern) if context is not None else ():
        out.append(_wild(pattern[pos : m.start()], wild))
        out.append(re.escape(resolve_variable(m.group(1), ctx)))
        pos = m.end()
    return "".join(out) + _wild(pattern[pos:], wild)


def _wild(text: str, wild: bool = True) -> str:
    if not wild:
        return re.escape(text)
    return "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in text)


def resolve_variable(body: str, context: dict[str, str]) -> str:
    """The value of one ``${key}`` from a context with lower-case keys (:class:`Unresolved` when it has none)."""
    key = body.strip()
    if not key or any(c in key for c in ",'*?$ "):
        raise ValueError(f"policy variable ${{{body}}} is not evaluated here (only ${{key}})")
    value = context.get(key.lower())
    if value is None:
        raise Unresolved(key)
    return value


def wildcard_match(pattern: str, text: str, *, case: bool = True, context: dict[str, str] | None = None) -> bool:
    """IAM's ``*``/``?`` wildcard match of the whole ``text``; with ``context``, policy variables in ``pattern``
    are replaced by the context's values first (:class:`Unresolved` when one has none)."""
    return re.fullmatch(_pattern(pattern, context), text, 0 if case else re.IGNORECASE) is not None


def _op_holds(op: str, wanted: list[str], present: bool, value: str, context: dict[str, str] | None = None) -> bool:
    base, if_exists = (op[: -len("IfExists")], True) if op.endswith("IfExists") else (op, False)
    if base == "Null":
        return all((str(w).lower() == "true") != present for w in wanted)
    if base == "Bool":
        return if_exists if not present else any(str(w).lower() == value.lower() for w in wanted)
    if base not in _STRING_OPS:
        raise ValueError(f"condition operator {op!r} is not evaluated here")
    if not present:
        return if_exists or base.startswith("StringNot")
    if base in ("StringEquals", "StringNotEquals"):
        hit = any(re.fullmatch(_pattern(str(w), context, wild=False), value) is not None for w in wanted)
    else:
        hit = any(wildcard_match(str(w), value, context=context) for w in wanted)
    return hit if base in ("StringEquals", "StringLike") else not hit


def conditions_hold(block: dict[str, Any], context: dict[str, str]) -> bool:
    """Every operator and key of a statement's ``Condition`` block holds for the request's ``context``."""
    ctx = {k.lower(): v for k, v in context.items()}
    for op, keys in (block or {}).items():
        for key, wanted in keys.items():
            present = key.lower() in ctx
            if not _op_holds(op, [str(w) for w in _as_list(wanted)], present, ctx.get(key.lower(), ""), ctx):
                return False
    return True


def _matches(st: dict[str, Any], action: str, resource: str, context: dict[str, str]) -> bool:
    try:
        return _statement_matches(st, action, resource, context)
    except Unresolved:
        return False


def _statement_matches(st: dict[str, Any], action: str, resource: str, context: dict[str, str]) -> bool:
    if "Action" in st:
        acts = any(wildcard_match(str(a), action, case=False) for a in _as_list(st["Action"]))
    else:
        acts = not any(wildcard_match(str(a), action, case=False) for a in _as_list(st.get("NotAction", [])))
    if "Resource" in st:
        res = any(wildcard_match(str(r), resource, context=context) for r in _as_list(st["Resource"]))
    else:
        res = not any(wildcard_match(str(r), resource, context=context) for r in _as_list(st.get("NotResource", [])))
    return acts and res and conditions_hold(st.get("Condition") or {}, context)


def decide(policy: dict[str, Any], action: str, resource: str, context: dict[str, str] | None = None) -> str:
    """:data:`ALLOW`, :data:`EXPLICIT_DENY` or :data:`IMPLICIT_DENY` for one request under ``policy``."""
    ctx = context or {}
    matching = [st for st in _as_list(policy.get("Statement") or []) if _matches(st, action, resource, ctx)]
    if any(st.get("Effect") == "Deny" for st in matching):
        return EXPLICIT_DENY
    return ALLOW if any(st.get("Effect") == "Allow" for st in matching) else IMPLICIT_DENY


__all__ = [
    "ALLOW",
    "EXPLICIT_DENY",
    "IMPLICIT_DENY",
    "VARIABLE",
    "Unresolved",
    "conditions_hold",
    "decide",
    "resolve_variable",
    "wildcard_match",
]
