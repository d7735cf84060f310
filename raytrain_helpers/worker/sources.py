"""Where the training data is read from, by Ray Data on the nodes: a local file or folder, ``s3://``, or a dataset's
files on the Hugging Face Hub (``hf://datasets/<org>/<name>/<path>``).

Files: ``.jsonl`` / ``.json``, ``.parquet``, ``.csv`` (their columns name the form: :mod:`.formats`), or ``.txt``
(one ``text`` row per line). A folder holds files of one kind.

The Hub is read through ``huggingface_hub``'s fsspec filesystem (``HfFileSystem``) handed to Ray Data's readers as
``filesystem=``: Ray Data wraps an fsspec filesystem in ``pyarrow.fs.PyFileSystem(FSSpecHandler(...))``
(ray 2.58.0, ``ray/data/datasource/path_util.py: _validate_and_wrap_filesystem``), and ``ray.data.from_huggingface``'s
own docstring recommends ``read_parquet`` with ``HfFileSystem`` for Hub datasets (ray 2.58.0,
``ray/data/read_api.py``). A dataset that needs a token (gated or private) gets ``HF_TOKEN`` from the environment:
on aws the Ray pods have it from the Secret ``kubernetes.hf_token_secret`` names; it is never printed.

Runs in the job's driver; standard library at import time, Ray, pyarrow and huggingface_hub inside functions.
"""

from __future__ import annotations

import os
from typing import Any

from . import formats

#: The file kinds read, by extension.
EXTENSIONS = (".jsonl", ".json", ".parquet", ".csv", ".txt")
HF_PREFIX = "hf://"
S3_PREFIX = "s3://"


class DataSourceError(ValueError):
    """``train.data`` cannot be read (the message names the setting and the fix)."""


def hub_filesystem():
    """``huggingface_hub.HfFileSystem`` with ``HF_TOKEN`` when the environment has one (None: anonymous)."""
    from huggingface_hub import HfFileSystem

    return HfFileSystem(token=os.environ.get("HF_TOKEN") or None)


def list_files(source: str) -> list[str]:
    """The files under ``source`` (a file: itself), with an error naming the setting and the fix when there are
    none or the location cannot be listed."""
    try:
        if source.startswith(HF_PREFIX):
            fs = hub_filesystem()
            found = [source] if fs.isfile(source) else [HF_PREFIX + p for p in fs.find(source)]
        elif source.startswith(S3_PREFIX):
            import pyarrow.fs

            fs, path = pyarrow.fs.FileSystem.from_uri(source)
            info = fs.get_file_info(path)
            if info.type == pyarrow.fs.FileType.File:
                found = [source]
            else:
                sel = pyarrow.fs.FileSelector(path, recursive=True, allow_not_found=True)
                found = [S3_PREFIX + i.path for i in fs.get_file_info(sel) if i.is_file]
        elif os.path.isfile(source):
            found = [source]
        else:
            found = sorted(os.path.join(d, f) for d, _, fs_ in os.walk(source) for f in fs_)
    except Exception as e:  # noqa: BLE001 - no such repo, no access, no network: one message with the fix
        raise DataSourceError(
            f"train.data = {source!r} cannot be listed ({type(e).__name__}: {e}). Fix: check the path; for a gated "
            "or private Hub dataset put a token in the Secret kubernetes.hf_token_secret names (HF_TOKEN); for s3:// "
            "the bucket must be readable by the Ray pods' role"
        ) from None
    found = [f for f in found if f.lower().endswith(EXTENSIONS)]
    if not found:
        raise DataSourceError(
            f"train.data = {source!r} holds no {' / '.join(EXTENSIONS)} file. Fix: point train.data at a file, or a "
            "folder (or prefix) holding such files; on the Hub a dataset's files are hf://datasets/ORG/NAME/PATH "
            "(its 'Files' tab lists them)"
        )
    return found


def file_kind(files: list[str], source: str) -> str:
    """The one extension of ``files``; files of several kinds are an error naming the setting."""
    kinds = sorted({os.path.splitext(f)[1].lower() for f in files})
    if len(kinds) != 1:
        raise DataSourceError(
            f"train.data = {source!r}: expected files of one kind, found {kinds}. Fix: point train.data at one file "
            "or a folder of one kind"
        )
    return kinds[0]


def read_source(source: str, fmt: str = formats.AUTO, columns: dict[str, str] | None = None) -> tuple[Any, str]:
    """``(Dataset, format)``: the files of ``source`` read by Ray Data tasks (no CPUs reserved: the training workers
    hold the nodes' CPUs), with only the columns the format reads. A missing column is an error naming the column,
    ``train.data_format`` / ``train.data_columns`` and the fix, raised here on the driver before any worker starts."""
    import ray.data

    files = list_files(source)
    kind = file_kind(files, source)
    kw: dict[str, Any] = {"ray_remote_args": {"num_cpus": 0}}
    if source.startswith(HF_PREFIX):
        kw["filesystem"] = hub_filesystem()
    if kind == ".txt":
        ds = ray.data.read_text(files, **kw)
    elif kind == ".parquet":
        ds = ray.data.read_parquet(files, **kw)
    elif kind == ".csv":
        ds = ray.data.read_csv(files, **kw)
    else:
        ds = ray.data.read_json(files, lines=kind == ".jsonl", **kw)
    fmt = formats.pick_format(fmt, ds.schema().names, columns, source)
    return ds.select_columns(list(formats.source_columns(fmt, columns).values()), num_cpus=0), fmt


def held_out_rows(
    source: str, fmt: str = formats.AUTO, columns: dict[str, str] | None = None, *, n: int = 20, every: int = 20
) -> tuple[list[dict[str, Any]], str]:
    """The first ``n`` held-out rows of ``source`` (the rows the job never trains on: :func:`.formats.is_eval_key`),
    in the files' order, under the form's own column names, and the form; read here with pyarrow (no Ray): what
    06 continues and scores. The files are read one by one until ``n`` rows are found."""
    import pyarrow.csv
    import pyarrow.json
    import pyarrow.parquet

    files = list_files(source)
    kind = file_kind(files, source)
    rows: list[dict[str, Any]] = []
    if kind == ".txt":  # plain text: no completion to score
        return rows, formats.TEXT
    for f in files:
        with _open(f) as fh:
            if kind == ".parquet":
                table = pyarrow.parquet.read_table(fh)
            elif kind == ".csv":
                table = pyarrow.csv.read_csv(fh)
            elif kind == ".jsonl":
                table = pyarrow.json.read_json(fh)
            else:
                import json

                data = json.load(fh)
                table = __import__("pyarrow").Table.from_pylist(data if isinstance(data, list) else [data])
        fmt = formats.pick_format(fmt, table.column_names, columns, source)
        names = formats.source_columns(fmt, columns)
        cols = {role: table.column(col).to_pylist() for role, col in names.items()}
        for i in range(table.num_rows):
            row = {role: cols[role][i] for role in names}
            if formats.is_eval_key(formats.row_key(fmt, row), every):
                rows.append(row)
                if len(rows) >= n:
                    return rows, fmt
    return rows, fmt


def _open(path: str):
    """A binary file object of a local, s3:// or hf:// path."""
    if path.startswith(HF_PREFIX):
        return hub_filesystem().open(path, "rb")
    if path.startswith(S3_PREFIX):
        import pyarrow.fs

        fs, p = pyarrow.fs.FileSystem.from_uri(path)
        return fs.open_input_file(p)
    return open(path, "rb")
