"""``s3://`` URIs: the one parser of the package (:func:`parse_s3_uri`), used when the settings are read
(:func:`check_storage_uri`) and wherever a bucket and a prefix are taken from a URI: a bucket name S3 accepts, a
plain prefix.

The general purpose bucket naming rules (Amazon S3 User Guide, "General purpose bucket naming rules",
docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html, checked 2026-12-04): 3-63 characters of
lower-case letters, digits, '.' and '-'; a letter or digit first and last; no '..'; not an IP address; not
starting with ``xn--``, ``sthree-`` or ``amzn-s3-demo-``; not ending with ``-s3alias``, ``--ol-s3``, ``.mrap``,
``--x-s3`` or ``--table-s3``. Imports nothing of the package.
"""

from __future__ import annotations

import re

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def bucket_name_problem(name: str) -> str:
    """Why S3 would refuse ``name`` as a general purpose bucket ('' = it would not)."""
    if not NAME_RE.match(name):
        return "3-63 lower-case letters, digits, '-' and '.', a letter or digit first and last"
    if ".." in name:
        return "two adjacent periods"
    if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", name):
        return "formatted as an IP address"
    for p in RESERVED_PREFIXES:
        if name.startswith(p):
            return f"the prefix {p!r} is reserved"
    for s in RESERVED_SUFFIXES:
        if name.endswith(s):
            return f"the suffix {s!r} is reserved"
    return ""


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://BUCKET[/PREFIX]`` -> (``BUCKET``, ``PREFIX`` without its slashes); ValueError with the fix when it is
    not an S3 URI, names no bucket, a bucket name S3 refuses (:func:`bucket_name_problem`), a placeholder, or a
    prefix with wildcards or '//'. The message reads after the setting's name (``train.storage_path ...``)."""
    v = (uri or "").strip()
    m = re.match(r"^s3://([^/]*)(/.*)?$", v)
    if not m or not m.group(1):
        raise ValueError(
            "names no bucket. Fix: s3://BUCKET/PREFIX (for example s3://my-checkpoints/raytrain), or leave it "
            "empty on aws (step 02 then creates a bucket of its own)"
        )
    bucket, prefix = m.group(1), (m.group(2) or "").strip("/")
    if "<" in bucket or ">" in bucket:  # a profile's placeholder, e.g. s3://<your-bucket>/raytrain
        raise ValueError(
            f"is a placeholder ({bucket}), not a bucket: set it before anything runs. Fix: -p storage_path "
            f"s3://YOUR-BUCKET/{prefix or 'raytrain'} (a bucket of yours in aws.region), the same in "
            "RAYTRAIN_STORAGE_PATH or your own override file, or -p storage_path '' on aws to let step 02 create one"
        )
    why = bucket_name_problem(bucket)
    if why:
        raise ValueError(
            f"{bucket!r} is not a bucket name S3 accepts ({why}). Fix: s3://BUCKET/PREFIX with a valid name, "
            f"e.g. s3://{_suggest(bucket)}/{prefix or 'raytrain'}"
        )
    if any(c in prefix for c in "*?[]") or "//" in prefix:
        raise ValueError("the prefix may not hold wildcards or '//'. Fix: a plain path such as s3://BUCKET/raytrain")
    return bucket, prefix


def check_storage_uri(value: str) -> str:
    """``value`` when it is not an ``s3:`` URI or a valid ``s3://BUCKET[/PREFIX]`` (:func:`parse_s3_uri`);
    ValueError with the fix otherwise."""
    v = (value or "").strip()
    if v.lower().startswith("s3:"):
        parse_s3_uri(v)
    return v


def _suggest(bucket: str) -> str:
    name = re.sub(r"[^a-z0-9.-]+", "-", bucket.lower()).strip("-.")
    name = re.sub(r"\.\.+", ".", name)[:63].strip("-.")
    return name if len(name) >= 3 and not bucket_name_problem(name) else "my-checkpoints"


__all__ = ["NAME_RE", "bucket_name_problem", "check_storage_uri", "parse_s3_uri"]
