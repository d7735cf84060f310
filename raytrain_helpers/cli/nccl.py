"""``raytrain-tutorial audit LOG [LOG...] [--expect ...] [--marker ...] [--json]``: the NCCL transport audit."""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ..core.constants import MARKER_PREFIX
from ..nccl import EXPECTATIONS, WORKER_FILE, audit, select_run
from ..steps import evidence
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
        "logs",
        nargs="+",
        metavar="LOG",
        help="log file ('-' = stdin; a directory = its worker-*.out/.err files; a run's saved evidence, "
        "runs/<run>/evidence/<kind>: its workers' logs against the transport expected then, and its ranks)",
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


def _cli_audit_evidence(args: argparse.Namespace, path: Path) -> int:
    """06's transport verdict and rank count from a saved reading (:mod:`..steps.evidence`), the cluster gone."""
    try:
        ev = evidence.load(path)
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    expect = args.expect or ev.expected
    said, world = ev.success()
    job = ev.job
    ranks = len(job.ranks) if job else 0
    world = (job.metrics.get("world_size") if job else 0) or world
    res = None if expect == "none" else audit(ev.logs, expect=expect, marker=args.marker)
    ranks_ok = bool(world) and said == set(range(world)) and ranks == world
    size = res.world.size if res is not None and res.world is not None else 0
    if args.json:
        doc = dict(
            evidence=str(path),
            expected=expect,
            transport=json.loads(res.to_json()) if res is not None else "n/a: CPU run, gloo (NCCL not used)",
            ranks_success=sorted(said),
            world_size=world,
            summaries=ranks,
            nccl_world_size=size if res is not None else None,
        )
        print(json.dumps(doc, indent=1))
    else:
        m = ev.manifest
        print(f"saved evidence: {path} ({m.get('kind')}, run {m.get('run_name')!r}, read {m.get('saved_at')})")
        if res is None:
            print(f"transport: n/a: CPU run, gloo over loopback (NCCL not used); expected {expect}")
        else:
            res.show()
            print(f"NCCL world communicator: {size} ranks; the job: {world} ranks")
        print(f"ranks: {len(said)}/{world} printed SUCCESS, {ranks}/{world} summaries gathered")
    ok = ranks_ok and (res is None or (res.ok and size == world))
    return 0 if ok else 1


def _cli_audit(args: argparse.Namespace) -> int:
    if len(args.logs) == 1 and evidence.is_evidence(Path(args.logs[0])):
        return _cli_audit_evidence(args, Path(args.logs[0]))
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
