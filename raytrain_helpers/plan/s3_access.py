"""What the job's storage layer asks of S3, request by request, and what IAM authorises each request as.

Ray Train 2.58 turns ``train.storage_path`` into ``pyarrow.fs.FileSystem.from_uri(storage_path)``
(``ray/train/v2/_internal/execution/storage.py``: ``get_fs_and_path``); its ``StorageContext`` then calls
``create_dir`` + ``open_output_stream`` (the ``.validate_storage_marker`` file) + ``get_file_info``, and for each
checkpoint ``create_dir`` + ``pyarrow.fs.copy_files``; listing and deleting go through ``get_file_info(FileSelector)``
and ``delete_dir``/``delete_file``. :data:`STORAGE_REQUESTS` is what pyarrow 26 sends for those calls, recorded
from a real run against moto's S3 server (``tests/unit/plan/test_s3_access.py`` records it again and fails when
it changes), with the run's prefix written ``{p}``.

The IAM action, resource and condition keys of each S3 operation (:func:`authorizations`), as documented
(checked 2026-12-04):

* AWS Service Authorization Reference, "Actions, resources, and condition keys for Amazon S3"
  (docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html): HeadBucket and ListObjectsV2
  -> ``s3:ListBucket`` on the bucket ARN (``s3:prefix``, ``s3:delimiter``, ``s3:max-keys`` from the request's
  parameters; HeadBucket has none of them); HeadObject/GetObject -> ``s3:GetObject``; PutObject,
  CreateMultipartUpload, UploadPart, CompleteMultipartUpload -> ``s3:PutObject``; AbortMultipartUpload ->
  ``s3:AbortMultipartUpload``; DeleteObject and DeleteObjects -> ``s3:DeleteObject`` on each object's ARN.
* S3 API Reference, HeadObject/GetObject "Permissions": when the key does not exist S3 answers 404 only to a
  caller that also holds ``s3:ListBucket`` on the bucket, 403 otherwise - and pyarrow's ``get_file_info``
  takes 403 for an error, not for "not found".
* apache/arrow ``cpp/src/arrow/filesystem/s3fs.cc`` (commit 515410b, 2026-08-21): ``CreateDir(recursive)``
  calls ``BucketExists`` (HeadBucket; any answer but 404 is an error) after ``GetBackend``, a HeadBucket on the
  bucket ``$extremelyunlikelytoexist$`` whose failure is expected (it only reads which S3 implementation
  answers: :data:`BACKEND_PROBE`); ``S3Options::FromUri`` resolves the bucket's region with an anonymous
  HeadBucket when no endpoint is given (unsigned, so no IAM policy of the role applies to it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The bucket of arrow's backend probe (a HeadBucket whose failure is expected and harmless).
BACKEND_PROBE = "$extremelyunlikelytoexist$"


@dataclass(frozen=True)
class S3Request:
    """One HTTP request to S3 (path-style): method, bucket, key, query pairs, the status answered, and for a
    multi-object delete the keys it names."""

    method: str
    bucket: str
    key: str = ""
    query: tuple[tuple[str, str], ...] = ()
    status: int = 200
    delete_keys: tuple[str, ...] = ()

    @property
    def params(self) -> dict[str, str]:
        return dict(self.query)

    @property
    def operation(self) -> str:
        """The S3 API operation this request is."""
        q, m = self.params, self.method
        if not self.key:
            by_method = {"HEAD": "HeadBucket", "PUT": "CreateBucket", "DELETE": "DeleteBucket"}
            if m == "GET":
                return "ListObjectsV2" if q.get("list-type") == "2" else "ListObjects"
            if m == "POST" and "delete" in q:
                return "DeleteObjects"
            return by_method.get(m, f"{m} bucket")
        if m == "PUT":
            return "UploadPart" if "uploadId" in q else "PutObject"
        if m == "POST":
            return "CreateMultipartUpload" if "uploads" in q else "CompleteMultipartUpload"
        if m == "DELETE":
            return "AbortMultipartUpload" if "uploadId" in q else "DeleteObject"
        return {"HEAD": "HeadObject", "GET": "GetObject"}.get(m, f"{m} object")


@dataclass(frozen=True)
class Authorization:
    """What IAM evaluates for (part of) a request: the action, the resource ARN and the request's condition keys
    (only those present in the request: an absent key is absent, not empty)."""

    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()


#: S3 operation -> the IAM action its object requests need.
OBJECT_ACTION = {
    "HeadObject": "s3:GetObject",
    "GetObject": "s3:GetObject",
    "PutObject": "s3:PutObject",
    "CreateMultipartUpload": "s3:PutObject",
    "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject",
    "AbortMultipartUpload": "s3:AbortMultipartUpload",
    "DeleteObject": "s3:DeleteObject",
}
#: ListObjectsV2 query parameter -> the condition key it sets.
LIST_KEYS = {"prefix": "s3:prefix", "delimiter": "s3:delimiter", "max-keys": "s3:max-keys"}


def authorizations(req: S3Request) -> list[Authorization]:
    """Everything IAM must allow for ``req`` to be answered as it was (a 404 to HeadObject/GetObject included)."""
    bucket_arn = f"arn:aws:s3:::{req.bucket}"
    op = req.operation
    if op == "HeadBucket":
        return [Authorization("s3:ListBucket", bucket_arn)]
    if op in ("ListObjectsV2", "ListObjects"):
        ctx = tuple(sorted((LIST_KEYS[k], v) for k, v in req.query if k in LIST_KEYS))
        return [Authorization("s3:ListBucket", bucket_arn, ctx)]
    if op == "DeleteObjects":
        return [Authorization("s3:DeleteObject", f"{bucket_arn}/{k}") for k in req.delete_keys]
    if op in OBJECT_ACTION:
        out = [Authorization(OBJECT_ACTION[op], f"{bucket_arn}/{req.key}")]
        if op in ("HeadObject", "GetObject") and req.status == 404:
            out.append(Authorization("s3:ListBucket", bucket_arn))  # else S3 answers 403
        return out
    raise ValueError(f"{req.method} /{req.bucket}/{req.key}: {op} is not an operation the storage layer sends")


#: pyarrow 26.0.1's requests (method, key, query, status) for Ray Train 2.58's StorageContext on
#: ``s3://BUCKET/{p}`` with the run ``run`` (validation file, one checkpoint persisted with two files, the run
#: listed, the checkpoint deleted) and for the in-pod check (:mod:`raytrain_helpers.targets.aws.storage.check`,
#: folder ``check``), recorded against moto's S3 server: each distinct request once, sorted. The run prefix is
#: written ``{p}``, each folder above it ``{parent}/`` (pyarrow's ``create_dir`` writes a marker object for every
#: level of the path), upload ids ``ID``; a DeleteObjects' keys follow ``|``.
STORAGE_REQUESTS: tuple[tuple[str, str, str, int], ...] = (
    ("DELETE", "{p}/check/", "", 204),
    ("DELETE", "{p}/run/checkpoint/", "", 204),
    ("GET", "", "delimiter=/&list-type=2&max-keys=1&prefix={p}/check/missing/", 200),
    ("GET", "", "delimiter=/&list-type=2&max-keys=1&prefix={p}/run/checkpoint/", 200),
    ("GET", "", "delimiter=/&list-type=2&max-keys=1000&prefix={p}/run/", 200),
    ("GET", "", "list-type=2&max-keys=1000&prefix={p}/check/", 200),
    ("GET", "", "list-type=2&max-keys=1000&prefix={p}/run/checkpoint/", 200),
    ("GET", "{p}/check/probe.txt", "", 206),
    ("HEAD", "", "", 200),
    ("HEAD", "{p}/check", "", 404),
    ("HEAD", "{p}/check/missing", "", 404),
    ("HEAD", "{p}/check/probe.txt", "", 200),
    ("HEAD", "{p}/run/.validate_storage_marker", "", 200),
    ("HEAD", "{p}/run/checkpoint", "", 404),
    ("POST", "", "delete=|{p}/check/probe.txt", 200),
    ("POST", "", "delete=|{p}/run/checkpoint/.metadata|{p}/run/checkpoint/shard.distcp", 200),
    ("POST", "{p}/check/probe.txt", "uploadId=ID", 200),
    ("POST", "{p}/check/probe.txt", "uploads=", 200),
    ("POST", "{p}/run/.validate_storage_marker", "uploadId=ID", 200),
    ("POST", "{p}/run/.validate_storage_marker", "uploads=", 200),
    ("POST", "{p}/run/checkpoint/.metadata", "uploadId=ID", 200),
    ("POST", "{p}/run/checkpoint/.metadata", "uploads=", 200),
    ("POST", "{p}/run/checkpoint/shard.distcp", "uploadId=ID", 200),
    ("POST", "{p}/run/checkpoint/shard.distcp", "uploads=", 200),
    ("PUT", "{parent}/", "", 200),
    ("PUT", "{p}/", "", 200),
    ("PUT", "{p}/check/", "", 200),
    ("PUT", "{p}/check/probe.txt", "partNumber=1&uploadId=ID", 200),
    ("PUT", "{p}/run/", "", 200),
    ("PUT", "{p}/run/.validate_storage_marker", "partNumber=1&uploadId=ID", 200),
    ("PUT", "{p}/run/checkpoint/", "", 200),
    ("PUT", "{p}/run/checkpoint/.metadata", "partNumber=1&uploadId=ID", 200),
    ("PUT", "{p}/run/checkpoint/shard.distcp", "partNumber=1&uploadId=ID", 200),
)


def storage_requests(bucket: str, prefix: str) -> list[S3Request]:
    """:data:`STORAGE_REQUESTS` for this bucket and prefix (a ``{parent}/`` row once per folder above it)."""
    parts = prefix.split("/")
    parents = ["/".join(parts[:i]) for i in range(1, len(parts))]
    out = []
    for method, key, query, status in STORAGE_REQUESTS:
        query, _, deleted = query.partition("|")
        pairs = tuple(tuple(kv.split("=", 1)) for kv in query.replace("{p}", prefix).split("&") if kv)
        keys = tuple(k.replace("{p}", prefix) for k in deleted.split("|") if k)
        for k in [key.replace("{parent}", p) for p in parents] if "{parent}" in key else [key.replace("{p}", prefix)]:
            out.append(S3Request(method, bucket, k, pairs, status, keys))  # type: ignore[arg-type]
    return out


def shape(req: S3Request, bucket: str, prefix: str) -> tuple[str, str, str, int]:
    """``req`` as a row of :data:`STORAGE_REQUESTS`: the prefix written ``{p}``, a folder marker above it
    ``{parent}/``, upload ids ``ID``, the query sorted, a DeleteObjects' keys sorted after ``|``."""
    if req.bucket != bucket:
        raise ValueError(f"a request to bucket {req.bucket!r}, not {bucket!r}")
    parts = prefix.split("/")
    parents = {"/".join(parts[:i]) + "/" for i in range(1, len(parts))}

    def rel(text: str) -> str:
        if text == prefix or text.startswith(prefix + "/"):
            return "{p}" + text[len(prefix) :]
        return "{parent}/" if text in parents else text

    pairs = sorted((k, "ID" if k == "uploadId" else rel(v) if k == "prefix" else v) for k, v in req.query)
    query = "&".join(f"{k}={v}" for k, v in pairs)
    if req.delete_keys:
        query += "|" + "|".join(sorted(rel(k) for k in req.delete_keys))
    return req.method, rel(req.key), query, req.status


#: pyarrow's S3 errors name the AWS SDK's error kind and the S3 operation, e.g. "When testing for existence of
#: bucket 'b': AWS Error ACCESS_DENIED during HeadBucket operation: No response body." - with " (HTTP status N)"
#: after an UNKNOWN kind (arrow cpp/src/arrow/filesystem/s3_internal.h, ErrorToStatus, commit 515410b).
_AWS_ERROR_RE = re.compile(r"AWS Error ([A-Z_]+)(?: \(HTTP status (\d+)\))? during (\w+) operation")
#: The in-pod check's step that looks up a key never written (a 404 needs s3:ListBucket, else S3 answers 403).
MISSING_KEY_STEP = "get_file_info missing"


@dataclass(frozen=True)
class Denial:
    """A failed storage call read from pyarrow's message: the S3 operation, the SDK's error kind, and the IAM
    action that operation needs (for the missing-key lookup, ``s3:ListBucket``)."""

    operation: str
    kind: str
    action: str

    @property
    def access_denied(self) -> bool:
        return self.kind == "ACCESS_DENIED"


def denial(step: str, error: str) -> Denial | None:
    """The :class:`Denial` in pyarrow's ``error`` for an in-pod check ``step``; None when it names no operation."""
    m = _AWS_ERROR_RE.search(error or "")
    if not m:
        return None
    kind, status, op = m.groups()
    kind = "ACCESS_DENIED" if status == "403" else kind
    if op == "HeadBucket" or op.startswith("ListObjects") or (op == "HeadObject" and step == MISSING_KEY_STEP):
        action = "s3:ListBucket"
    elif op == "DeleteObjects":
        action = "s3:DeleteObject"
    else:
        action = OBJECT_ACTION.get(op, "")
    return Denial(op, kind, action)


__all__ = [
    "BACKEND_PROBE",
    "MISSING_KEY_STEP",
    "Denial",
    "denial",
    "LIST_KEYS",
    "OBJECT_ACTION",
    "STORAGE_REQUESTS",
    "Authorization",
    "S3Request",
    "authorizations",
    "shape",
    "storage_requests",
]
