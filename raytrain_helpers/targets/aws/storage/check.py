"""The in-pod storage check: the job's own storage code, run from a pod with the tutorial's ServiceAccount.

This file is a program: it is sent as it is to ``python3 -c`` inside a Ray pod (the Ray Train DLC carries
pyarrow), with the run's storage URI and a folder name under it::

    python3 -c "$(cat storage_check.py)" s3://BUCKET/PREFIX .raytrain-access-check/POD-TIME

It builds the filesystem the way Ray Train 2.58 does (``pyarrow.fs.FileSystem.from_uri(storage_path)``, in
``ray/train/v2/_internal/execution/storage.py``: ``get_fs_and_path``) and makes the calls Ray Train's
``StorageContext`` makes (``create_dir``, ``open_output_stream``, ``get_file_info``) plus reading, listing
(``FileSelector(recursive=True)``) and deleting, all under the folder. It prints one JSON line per step:
``{"step", "ok", "detail", "error"}`` - ``error`` is pyarrow's own message (``... AWS Error ACCESS_DENIED during
HeadBucket operation ...``), which :func:`raytrain_helpers.plan.s3_access.denial` turns into the IAM action
and the fix on the notebook's side. It stops at the first failed step, then deletes what it wrote.

Only the standard library and pyarrow: nothing of the package is importable inside the pod.
"""

from __future__ import annotations

import json
import sys

#: The steps, in order (the names 04 shows).
STEPS = ("filesystem", "create_dir", "write", "get_file_info", "get_file_info missing", "read", "list", "delete")
PROBE_NAME = "probe.txt"
BODY = b"raytrain storage check\n"


def say(step: str, ok: bool, detail: str = "", error: str = "") -> None:
    print(json.dumps({"step": step, "ok": ok, "detail": detail, "error": error[:600]}), flush=True)


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
