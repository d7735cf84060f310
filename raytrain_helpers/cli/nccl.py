"""``raytrain-tutorial audit LOG [LOG...] [--expect ...] [--marker ...] [--json]``: the NCCL transport audit."""

from __future__ import annotations

import argparse
import gzip
import sys
from collections.abc import Sequence
from pathlib import Path

from ..core.constants import MARKER_PREFIX
from ..nccl import EXPECTATIONS, WORKER_FILE, audit, select_run
from .args import add_settings_args, settings_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "audit",
        help="audit NCCL_DEBUG=INFO logs: the transport each rank pair used, against the expected one",
        description="Reads NCCL INFO lines (bare, Ray- or kubectl-prefixed), builds the rank-pair x transport "
        "matrix and says whether the expected transport was used. Exit 0: as expected; 1: not; "
        "2: unreadable input.",
    )
    p.add_argument(
        "logs", nargs="+", metavar="LOG", help="log file ('-' = stdin; a directory = its worker-*.out/.err files)"
    )
    p.add_argument(
        "--expect",
        choices=EXPECTATIONS,
        default=None,
        help="expected transport (default: the nccl.expect setting, auto)",
    )
    p.add_argument("--marker", default=None, help="keep only the logs of this run marker")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_settings_args(p)
    p.set_defaults(func=_cli_audit)


#: The most a log may hold (after decompression): NCCL INFO logs of a whole run are a few MiB.
MAX_LOG_BYTES = 256 * 2**20
_GZIP_MAGIC = b"\x1f\x8b"


def read_log(path: Path) -> str:
    """One log file's text: plain or gzip-compressed; refuses (OSError, with the fix) an empty, binary or huge
    file before reading it whole."""
    size = path.stat().st_size
    if size == 0:
        raise OSError(f"{path} is empty. Fix: pass the training workers' log, written with nccl.debug: INFO")
    with path.open("rb") as f:
        compressed = f.read(2) == _GZIP_MAGIC
    if not compressed and size > MAX_LOG_BYTES:
        raise OSError(
            f"{path} holds {size / 2**20:.0f} MiB, more than the audit reads ({MAX_LOG_BYTES // 2**20} MiB). "
            f"Fix: keep the NCCL lines first: grep -a 'NCCL INFO' {path} > nccl.log, and audit nccl.log"
        )
    opener = gzip.open if compressed else open
    try:
        with opener(path, "rb") as f:
            data = f.read(MAX_LOG_BYTES + 1)
    except (OSError, EOFError) as e:
        raise OSError(f"{path}: a damaged gzip file ({e}). Fix: pass the log itself, or a complete .gz of it") from None
    if len(data) > MAX_LOG_BYTES:
        raise OSError(f"{path} decompresses to more than {MAX_LOG_BYTES // 2**20} MiB. Fix: audit the NCCL lines only")
    if b"\x00" in data[:65536]:
        raise OSError(
            f"{path} is not a text log (it holds NUL bytes). Fix: pass the workers' text log (.out/.err/.log)"
        )
    return data.decode("utf-8", errors="replace")


def _read_inputs(paths: Sequence[str]) -> dict[str, str]:
    """``{name: text}`` of each LOG argument: a file, ``-`` (stdin), or a directory's worker-*.out/.err files."""
    texts: dict[str, str] = {}
    for s in paths:
        if s == "-":
            texts["<stdin>"] = sys.stdin.read()
            continue
        path = Path(s)
        if path.is_dir():
            files = sorted(f for f in path.iterdir() if WORKER_FILE.match(f.name) and f.is_file())
            if not files:
                raise OSError(
                    f"{path}: a directory without worker-*.out/.err files. Fix: pass the log files themselves"
                )
            for f in files:
                texts[str(f)] = read_log(f)
            continue
        if not path.exists():
            raise OSError(f"{path} does not exist. Fix: check the path (a log file, a folder of worker logs, or -)")
        texts[str(path)] = read_log(path)
    return texts


def _cli_audit(args: argparse.Namespace) -> int:
    try:
        texts = _read_inputs(args.logs)
    except OSError as e:
        print(f"error: cannot read the log: {e.strerror if e.filename else e}", file=sys.stderr)
        return 2
    if args.marker:
        try:
            texts = select_run(texts, args.marker)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if not texts:
            print(f"error: no log holds the line '{MARKER_PREFIX}{args.marker}'", file=sys.stderr)
            return 2
    expect = args.expect
    if expect is None:
        expect = settings_from_args(args).nccl.expect
    res = audit(texts, expect=expect)
    if args.json:
        print(res.to_json())
    else:
        res.show()
    return 0 if res.ok else 1
