"""The in-pod storage check: the job's own storage code, run from a pod with the tutorial's ServiceAccount.

This file is a program: it is sent as it is to ``python3 -c`` inside a Ray pod (the Ray Train DLC carries
pyarrow), with the run's storage URI and a folder name under it::

    python3 -c "$(cat storage_check.py)" s3://BUCKET/PREFIX .raytrain-access-check/POD-TIME [ROLE REGION]

It builds the filesystem the way Ray Train 2.58 does (``pyarrow.fs.FileSystem.from_uri(storage_path)``, in
``ray/train/v2/_internal/execution/storage.py``: ``get_fs_and_path``) and makes the calls Ray Train's
``StorageContext`` makes (``create_dir``, ``open_output_stream``, ``get_file_info``) plus reading, listing
(``FileSelector(recursive=True)``) and deleting, all under the folder. It prints one JSON line per step:
``{"step", "ok", "detail", "error"}`` - ``error`` is pyarrow's own message (``... AWS Error ACCESS_DENIED during
HeadBucket operation ...``), which :func:`raytrain_helpers.plan.s3_access.denial` turns into the IAM action
and the fix on the notebook's side. It stops at the first failed step, then deletes what it wrote.

Before any S3 call it confirms which identity it runs as (``identity``, when the storage role's name and the
region are given as third and fourth argument). EKS Pod Identity's webhook sets ``AWS_CONTAINER_CREDENTIALS_FULL_URI``
and ``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`` in the containers of a pod whose ServiceAccount has an association
(AWS SDKs and Tools Reference Guide, "Container credential provider"), at the pod's creation; an association is
eventually consistent and "may take several seconds to be effective" (AWS CLI reference,
``eks create-pod-identity-association``), so a pod created meanwhile has neither variable, and its SDK falls back to
the node's instance role: every S3 call is then denied for a reason that is not the storage role's policy. The step
prints ``injected`` (both variables set) and ``arn``, the caller's ARN from STS ``GetCallerIdentity`` through
botocore when the image has it (an EKS Pod Identity session is ``arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION``);
without botocore the ARN is not read and says so. A pod without the injection, or running as another role, stops
here: "wrong identity", not a missing permission.

Only the standard library, pyarrow and (if present) botocore: nothing of the package is importable inside the pod.
"""

from __future__ import annotations

import json
import os
import sys

#: The steps, in order (the names 04 shows).
STEPS = (
    "identity",
    "filesystem",
    "create_dir",
    "write",
    "get_file_info",
    "get_file_info missing",
    "read",
    "list",
    "delete",
)
PROBE_NAME = "probe.txt"
BODY = b"raytrain storage check\n"
#: What the EKS Pod Identity webhook sets in the containers of an associated ServiceAccount's pod.
INJECTED = ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")


def say(step: str, ok: bool, detail: str = "", error: str = "", **extra) -> None:
    print(json.dumps({"step": step, "ok": ok, "detail": detail, "error": error[:600], **extra}), flush=True)


def caller_arn(region: str) -> tuple[str, str]:
    """(the caller's ARN, how it was read): STS GetCallerIdentity through botocore (the SDK's own credential chain,
    the one pyarrow's AWS SDK also walks), or ("", why not) when the image has no botocore."""
    try:
        import botocore.session
    except ImportError:
        return "", "botocore is not in the image: the caller's ARN is not read, only the injected variables"
    sts = botocore.session.get_session().create_client("sts", region_name=region or None)
    return sts.get_caller_identity()["Arn"], "STS GetCallerIdentity"


def role_of(arn: str) -> str:
    """The role of an assumed-role session ARN (``arn:aws:sts::1:assumed-role/ROLE/SESSION``), else ''."""
    parts = arn.split(":", 5)
    if len(parts) == 6 and parts[2] == "sts" and parts[5].startswith("assumed-role/"):
        return parts[5].split("/")[1]
    return ""


def identity(role: str, region: str) -> bool:
    """Print the ``identity`` step: the injected variables and the caller's ARN against ``role``."""
    missing = [k for k in INJECTED if not os.environ.get(k)]
    try:
        arn, how = caller_arn(region)
    except Exception as e:  # noqa: BLE001 - no credentials at all is a finding too
        arn, how = "", f"STS GetCallerIdentity failed: {type(e).__name__}: {e}"
    facts = {"arn": arn, "injected": not missing, "role": role}
    if missing:
        runs = f"runs as {arn}" if arn else how
        say("identity", False, error=f"{' and '.join(missing)} not set in the container; {runs}", **facts)
    elif arn and role_of(arn) != role:
        say("identity", False, error=f"runs as {arn}, not as the role {role}", **facts)
    elif not arn and how.startswith("STS"):
        say("identity", False, error=f"EKS Pod Identity variables set, but {how}", **facts)
    else:
        say("identity", True, f"EKS Pod Identity: {arn or 'ARN not read'} ({how})", **facts)
        return True
    return False


def _write(fs, path: str) -> bool:
    with fs.open_output_stream(path) as out:
        out.write(BODY)
    return True


def _read(fs, path: str) -> bool | str:
    with fs.open_input_stream(path) as src:
        data = src.read()
    return data == BODY or f"read {len(data)} bytes, not the {len(BODY)} written"


def _steps(fs, pafs, folder: str):
    probe = f"{folder}/{PROBE_NAME}"

    def found():
        kind = fs.get_file_info(probe).type
        return kind == pafs.FileType.File or f"the written object is {kind}"

    def missing():
        kind = fs.get_file_info(f"{folder}/missing").type
        return kind == pafs.FileType.NotFound or f"a key never written is {kind}"

    def listed():
        paths = [i.path for i in fs.get_file_info(pafs.FileSelector(folder, recursive=True))]
        return paths == [probe] or f"listed {paths}, not [{probe}]"

    return [
        ("create_dir", lambda: fs.create_dir(folder)),
        ("write", lambda: _write(fs, probe)),
        ("get_file_info", found),
        ("get_file_info missing", missing),
        ("read", lambda: _read(fs, probe)),
        ("list", listed),
        ("delete", lambda: fs.delete_dir(folder)),
    ]


def main(argv: list[str]) -> int:
    """Run the steps; 0 when every step passed, 1 otherwise (each step printed either way)."""
    uri, name = argv[0].rstrip("/"), argv[1].strip("/")
    if len(argv) > 2 and not identity(argv[2], argv[3] if len(argv) > 3 else ""):
        return 1  # the wrong identity: its S3 answers would say nothing about the role's policy
    try:
        import pyarrow.fs as pafs

        fs, base = pafs.FileSystem.from_uri(uri)
    except Exception as e:  # noqa: BLE001 - any failure is the finding, printed
        say("filesystem", False, error=f"{type(e).__name__}: {e}")
        return 1
    say("filesystem", True, f"{type(fs).__name__} {base} (pyarrow.fs.FileSystem.from_uri, as Ray Train builds it)")
    folder = f"{base}/{name}"
    made = False
    for step, call in _steps(fs, pafs, folder):
        try:
            result = call()
        except Exception as e:  # noqa: BLE001
            say(step, False, error=f"{type(e).__name__}: {e}")
            break
        if isinstance(result, str):
            say(step, False, error=result)
            break
        made = made or step == "create_dir"
        say(step, True, f"{uri}/{name}")
    else:
        return 0
    if made:  # nothing half-written is left behind: the probe by name (no listing needed), then the folder
        for cleanup in (lambda: fs.delete_file(f"{folder}/{PROBE_NAME}"), lambda: fs.delete_dir(folder)):
            try:
                cleanup()
            except Exception:  # noqa: BLE001, S112 - the failed step above is what is reported
                continue
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
