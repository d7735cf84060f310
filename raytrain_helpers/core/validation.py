"""The rules a setting's value must satisfy, shared by the settings' validators, and the error they end in.

Every check names the fix in its message; :class:`ConfigError` carries the field, the value, its source and that fix
to the reader (:mod:`.loading` writes the message).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A setting is wrong. The message names the field, the value, its source and the fix."""


DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


REGION_RE = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")


RESERVATION_RE = re.compile(r"^cr-[0-9a-f]{8,17}$")


RUN_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def dns_label(field: str, max_len: int = 63):
    def check(v: str) -> str:
        if not isinstance(v, str) or len(v) > max_len or not DNS1123_LABEL.match(v):
            raise ValueError(
                f"must be a DNS-1123 label (lower-case letters, digits and '-', starting and ending "
                f"with a letter or digit, at most {max_len} characters). "
                f"Fix: e.g. {_suggest_dns(v, max_len)!r}"
            )
        return v

    return check


def _suggest_dns(v: Any, max_len: int) -> str:
    s = re.sub(r"[^a-z0-9-]+", "-", str(v).lower()).strip("-")[:max_len].strip("-")
    return s or "raytrain"


@functools.lru_cache(maxsize=1)
def known_regions() -> frozenset[str]:
    """Every AWS region botocore knows (its endpoints.json, read without importing botocore); empty without it."""
    spec = importlib.util.find_spec("botocore")
    if spec is None or not spec.origin:
        return frozenset()
    try:
        doc = json.loads((Path(spec.origin).parent / "data" / "endpoints.json").read_text())
    except (OSError, ValueError):
        return frozenset()
    return frozenset(r for part in doc.get("partitions", []) for r in part.get("regions", {}))
