"""``raytrain-tutorial handout``: one pre-filled folder per workshop attendee, and their progress.

A facilitator writes a roster (CSV with a header row): ``name`` is required, any human name; every other column
is a setting's flat name (``region``, ``gpu_az``, ``cluster_name``...) applied to that attendee. Each attendee
gets ``OUT/<id>/`` with an ``env.yaml`` (their ``run_name``, namespace and Ray cluster name) and the notebooks
with those parameters injected by papermill (prepared, not executed). An attendee whose row names a
``cluster_name`` has a cluster of their own; the others share the base cluster, each in a namespace of their own
that Kubernetes confines (Pod Security labels, quota, limits, a Role of their group:
:mod:`..plan.workshop_namespace`; ``OUT/<id>/namespace.yaml``, and all of them in ``OUT/shared-cluster.yaml``), and
with a ``principal_arn`` column, the EKS access entry that maps their own IAM role to that group
(``OUT/<id>/access-entry.json``). A row may not claim a system namespace or the base one.

Every row is validated before anything is written; nothing is left half-written when one fails. The hand-out
sizes the shared cluster for every attendee (:mod:`..plan.workshop`: the GPU node group holds every attendee's
RayCluster, one system node per Ray head, each namespace's GPU quota at least what its RayCluster asks for), writes
it as the facilitator's folder ``OUT/facilitator/env.yaml``, checks the account's vCPU quota through the target's
preflight, and refuses (nothing written) a workshop the quota cannot hold. Each attendee's env.yaml says
``aws.shared_cluster: true`` (their steps stay in their namespace), has ports and a raylet folder of its own for a
shared JupyterHub host, and a job timeout. ``OUT/workshop-cost.txt`` holds the cost estimate and what it assumes.

A room whose attendees' clusters run on one host (the local target) is planned for that host instead
(:func:`..plan.workshop.host_plan`: the sum of what each attendee's cluster takes against the host's cores, memory,
GPUs and disk; refused with the numbers), with no cloud cluster or cost.

The hand-out records what it wrote (``OUT/record/``, 0700, outside every attendee's folder) under a random hand-out
id that names each attendee's group, ClusterRole and access entry tags; the facilitator's commands act on that record
and refuse an attendee whose env.yaml changed what they act on (:mod:`.handout_workshop`).

``handout status OUT`` reads what each attendee's runs recorded in their folder (:mod:`.handout_progress`) and,
through the target, each attendee's RayCluster and last RayJob on the cluster; ``handout report OUT`` writes them
all into one inert HTML page; ``handout storage OUT`` gives
every shared-cluster attendee's namespace the facilitator's checkpoint storage (one EKS Pod Identity association
each, ``aws.storage_per_namespace``); ``handout namespaces OUT`` creates the shared-cluster attendees' namespaces (never
one that exists) and records their UIDs; ``handout teardown OUT`` removes only those namespaces and the storage
associations (and, with ``--yes``, the attendees' own clusters).
"""

from __future__ import annotations

import argparse
import csv
import json
import secrets
import shutil
import tempfile
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from ..core.loading import load
from ..core.names import resolve_key
from ..core.paths import notebooks_dir
from ..core.settings import Settings
from ..core.tables import format_table
from ..core.validation import ConfigError
from ..plan import workshop, workshop_namespace
from ..targets import for_settings
from . import handout_workshop
from .handout_progress import attendee_progress
from .handout_workshop import FACILITATOR, RECORD_DIR, RECORDED
from .handout_workshop import NAMESPACES_FILE as NAMESPACES

#: The roster's required column.
NAME_COLUMN = "name"
#: The roster's optional column that is not a setting: the attendee's own IAM role or user, which the shared
#: cluster's EKS access entry maps to their namespace (``OUT/<id>/access-entry.json``).
PRINCIPAL_COLUMN = "principal_arn"
#: What ``handout status`` reads back: the attendees of one hand-out.
INDEX_FILE = "handout.json"
#: Settings that decide whether an attendee has a cluster of their own.
OWN_CLUSTER_KEYS = ("cluster_name",)
#: train.job_timeout_s of every attendee whose base and row leave it at 0 (no limit): a budget guard.
DEFAULT_JOB_TIMEOUT_S = 2 * 3600


@dataclass
class Attendee:
    """One roster row, validated."""

    row: int
    name: str
    ident: str
    own_cluster: bool
    overrides: dict[str, str]
    settings: Settings
    principal_arn: str = ""
    on_host: bool = False  # the attendee's cluster runs on the hand-out's host (local target), not in a cloud


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``handout`` (write the folders) and ``handout status DIR``."""
    p = sub.add_parser(
        "handout",
        help="workshops: one pre-filled notebook folder per attendee (--roster CSV --out DIR), "
        "or 'handout status DIR' for their progress",
    )
    p.add_argument(
        "action",
        nargs="?",
        choices=("status", "report", "namespaces", "storage", "teardown"),
        help="status: each attendee's progress (folder and cluster); report: all of it in one HTML page; "
        "namespaces: create each shared-cluster attendee's namespace (quota, limits, Pod Security, RBAC); "
        "storage: give each attendee's namespace the facilitator's checkpoint storage (aws.storage_per_namespace); "
        "teardown: remove every namespace 'handout namespaces' created and each storage association (and with --yes "
        "the attendees' own clusters)",
    )
    p.add_argument("dir", nargs="?", help="the hand-out folder (with status, report, storage, teardown)")
    p.add_argument("--roster", help="CSV with a header row: name, then any setting's flat name as a column")
    p.add_argument("--out", help="the folder to write (one sub-folder per attendee)")
    p.add_argument("--env-file", default=None, help="the base variables file (default: env.yaml found upwards)")
    p.add_argument("-f", "--file", dest="files", action="append", default=[], metavar="YAML", help="base overrides")
    p.add_argument(
        "--gpus-per-attendee", type=int, default=None, help="shared cluster: raise each namespace's GPU quota"
    )
    p.add_argument("--hours", type=float, default=3.0, help="how long the workshop's clusters run (cost estimate)")
    p.add_argument(
        "--host",
        default=None,
        help="local-target rooms: the JupyterHub host's capacity where it is not this machine "
        "(cpus=N,memory_gib=N,gpus=N,disk_gib=N)",
    )
    p.add_argument("--offline", action="store_true", help="do not ask AWS for the vCPU quota (a note says so)")
    p.add_argument("--force", action="store_true", help="replace attendee folders that already exist")
    p.add_argument("--yes", action="store_true", help="teardown: also delete the attendees' own clusters")
    p.set_defaults(func=_cli_handout)


def _cli_handout(args: argparse.Namespace) -> int:
    if args.action:
        if not args.dir:
            raise ConfigError(
                f"handout {args.action} needs the hand-out folder. Fix: raytrain-tutorial handout {args.action} DIR"
            )
        return handout_workshop.action(args.action, Path(args.dir), read_index(Path(args.dir)), yes=args.yes)
    if not args.roster or not args.out:
        raise ConfigError(
            "handout needs --roster CSV and --out DIR. Fix: raytrain-tutorial handout --roster r.csv --out DIR"
        )
    attendees = read_roster(Path(args.roster), env_file=args.env_file, files=args.files)
    base = load(args.env_file, files=args.files, environ={}, check_installed_ray=False)
    room, cloud = handout_workshop.host_room([a.settings for a in attendees], parse_host(args.host))
    if room is not None and room.problems:
        raise ConfigError(
            f"the host cannot hold the {room.attendees} attendees' local clusters; nothing was written:\n  "
            + "\n  ".join(room.problems)
        )
    for a in attendees:
        a.on_host = a.settings.run_name not in cloud
    in_cloud = [(a.settings, a.own_cluster) for a in attendees if not a.on_host]
    wp = workshop.plan(base, in_cloud, gpus_per_attendee=args.gpus_per_attendee, hours=args.hours)
    notes = handout_workshop.check_account(base, wp, offline=args.offline) if in_cloud else []
    written = write_handout(attendees, Path(args.out), force=args.force, plan=wp, base=base, notes=notes, room=room)
    print(f"wrote {len(written)} attendee folders under {Path(args.out).resolve()}")
    print(summary_table(attendees))
    if room is not None:
        print(handout_workshop.host_text(room))
    if in_cloud:
        print(handout_workshop.plan_text(wp, notes))
    return 0


def parse_host(text: str | None) -> dict[str, float]:
    """``--host cpus=32,memory_gib=128,gpus=0,disk_gib=200``: the JupyterHub host's capacity, where the hand-out
    does not run on it (each key replaces the value read from this machine)."""
    out: dict[str, float] = {}
    keys = [k for k, _, _ in workshop.HOST_RESOURCES]
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, _, value = part.partition("=")
        try:
            if key.strip() not in keys:
                raise ValueError
            out[key.strip()] = float(value)
        except ValueError:
            raise ConfigError(
                f"--host {text!r}: {part!r} is not KEY=NUMBER of {', '.join(keys)}. "
                "Fix: e.g. --host cpus=32,memory_gib=128"
            ) from None
    return out


# ---- the roster ------------------------------------------------------------------------------------------------
def identifier(name: str) -> str:
    """A DNS-1123 label from any human name: ASCII letters and digits, '-' between words, at most 30 characters."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    out, dash = [], False
    for ch in ascii_name.lower():
        if ch.isascii() and ch.isalnum():
            out.append(ch)
            dash = False
        elif out and not dash:
            out.append("-")
            dash = True
    return "".join(out)[:30].strip("-")


def read_roster(path: Path, *, env_file: str | None = None, files: list[str] | tuple = ()) -> list[Attendee]:
    """Every row validated against the settings; all problems are reported together, with their row numbers."""
    rows = _read_csv(path)
    base = load(env_file, files=files, environ={}, check_installed_ray=False)
    attendees: list[Attendee] = []
    errors: list[str] = []
    seen: dict[str, int] = {}
    principals: dict[str, int] = {}
    for row_no, row in rows:
        try:
            att = _attendee(row_no, row, base, env_file, files)
        except ConfigError as e:
            errors.append(f"row {row_no} ({row.get(NAME_COLUMN) or 'no name'}): {e}")
            continue
        if att.ident in seen:
            errors.append(
                f"row {row_no} ({att.name}): its identifier '{att.ident}' is the same as row {seen[att.ident]}'s. "
                "Fix: make the names differ (e.g. add an initial)"
            )
            continue
        if att.principal_arn and att.principal_arn in principals:
            errors.append(
                f"row {row_no} ({att.name}): principal_arn {att.principal_arn} is also row "
                f"{principals[att.principal_arn]}'s: one identity would be bound in two namespaces. Fix: each "
                "attendee's own IAM role or user"
            )
            continue
        if att.principal_arn:
            principals[att.principal_arn] = row_no
        seen[att.ident] = row_no
        attendees.append(att)
    if errors:
        raise ConfigError(
            f"the roster {path} has {len(errors)} problem(s); nothing was written:\n  " + "\n  ".join(errors)
        )
    return attendees


def _read_csv(path: Path) -> list[tuple[int, dict[str, str]]]:
    if not path.is_file():
        raise ConfigError(f"roster {path} does not exist. Fix: a CSV file with a header row starting with 'name'")
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        header = [h.strip() for h in (reader.fieldnames or [])]
        if NAME_COLUMN not in header:
            raise ConfigError(f"roster {path} has no '{NAME_COLUMN}' column. Fix: a header row such as 'name,region'")
        for col in header:
            if col not in (NAME_COLUMN, PRINCIPAL_COLUMN):
                _check_column(path, col)
        rows = [(i + 2, {(k or "").strip(): (v or "").strip() for k, v in r.items()}) for i, r in enumerate(reader)]
    if not rows:
        raise ConfigError(f"roster {path} has no attendees. Fix: one row per attendee under the header")
    return rows


def _check_column(path: Path, col: str) -> None:
    try:
        resolve_key(col)
    except ConfigError as e:
        raise ConfigError(f"roster {path}: column '{col}' is not a setting: {e}") from None


def _attendee(row_no: int, row: dict[str, str], base: Settings, env_file: str | None, files) -> Attendee:
    name = row.get(NAME_COLUMN, "")
    if not name:
        raise ConfigError("the name is empty. Fix: every attendee needs a name")
    ident = identifier(name)
    if not ident:
        raise ConfigError(f"no identifier can be made from {name!r}. Fix: a name with some letters or digits")
    overrides = {k: v for k, v in row.items() if k and k not in (NAME_COLUMN, PRINCIPAL_COLUMN) and v != ""}
    own = any(resolve_key(k)[1] in OWN_CLUSTER_KEYS for k in overrides)
    derived: dict[str, Any] = dict(
        run_name=ident,
        namespace=f"{base.kubernetes.namespace}-{ident}"[:63].strip("-"),
        ray_cluster_name=f"{base.kubernetes.ray_cluster_name}-{ident}"[:40].strip("-"),
        shared_cluster=not own,
        **workshop.local_slot(row_no - 2, base),
    )
    if not base.train.job_timeout_s:
        derived["job_timeout_s"] = DEFAULT_JOB_TIMEOUT_S
    params: dict[str, Any] = dict(derived, **overrides)
    _refuse_auth_off(row_no, name, params)
    # attendees share the host: each cluster refuses every request without its own token (created at its first
    # `up`, 0600 in the attendee's own 0700 temp_root), whatever the base env.yaml says
    params["auth_mode"] = "token"
    settings = load(env_file, files=files, environ={}, check_installed_ray=False, **params)
    # an own cluster's 04 creates and 08 deletes its namespace too: never a system one or the base's
    problem = workshop_namespace.reserved_namespace_problem(settings.kubernetes.namespace, base.kubernetes.namespace)
    if problem:
        raise ConfigError(problem)
    if own and settings.aws.cluster_name == base.aws.cluster_name:
        raise ConfigError(
            f"cluster_name = {settings.aws.cluster_name!r} is the shared cluster, and a cluster of the attendee's own "
            "is theirs to create and delete (their 08, handout teardown --yes). Fix: leave cluster_name empty to "
            "share the base cluster, or give a name of the attendee's own"
        )
    principal = row.get(PRINCIPAL_COLUMN, "")
    if principal and not own:
        workshop_namespace.check_principal(principal)
    return Attendee(row=row_no, name=name, ident=ident, own_cluster=own, overrides=overrides, settings=settings,
                    principal_arn=principal)  # fmt: skip


def _refuse_auth_off(row_no: int, name: str, overrides: dict[str, Any]) -> None:
    for key, value in overrides.items():
        if resolve_key(key)[1] == "auth_mode" and str(value) != "token":
            raise ConfigError(
                f"row {row_no} ({name}): {key} = {value!r}; attendees on one host could then run code on each "
                "other's clusters, so hand-outs always use token authentication. Fix: remove that column"
            )


# ---- writing ---------------------------------------------------------------------------------------------------
def write_handout(
    attendees: list[Attendee],
    out: Path,
    *,
    force: bool = False,
    plan: workshop.WorkshopPlan,
    base: Settings,
    notes: list[str] = (),  # type: ignore[assignment]
    room: workshop.HostPlan | None = None,
) -> list[Path]:
    """Write every attendee's folder through a staging folder, so a failure leaves nothing half-written; then the
    facilitator's folder (the shared cluster sized by ``plan``), ``shared-cluster.yaml`` and the cost estimate."""
    _distinct_local(attendees)
    live = handout_workshop.created_namespaces(out)
    if live:
        raise ConfigError(
            f"{out} is a hand-out whose namespaces were created ({', '.join(sorted(live)[:5])}; {NAMESPACES}): "
            "writing it again would lose the record its teardown acts on. Fix: `raytrain-tutorial handout teardown "
            f"{out}` first, or another --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    clashes = [a.ident for a in attendees if (out / a.ident).exists() and any((out / a.ident).iterdir())]
    if clashes and not force:
        raise ConfigError(
            f"{len(clashes)} attendee folder(s) already exist under {out} ({', '.join(clashes[:5])}). "
            "Fix: another --out, or --force to replace them"
        )
    handout_id = secrets.token_hex(4)
    stage = Path(tempfile.mkdtemp(prefix=".handout-", dir=out))
    try:
        quotas = [
            _write_attendee(a, stage / a.ident, plan.gpu_quota.get(a.settings.kubernetes.namespace), handout_id)
            for a in attendees
        ]
        _write_record(out, stage, attendees)
        written = []
        for a in attendees:
            dst = out / a.ident
            if dst.exists():
                shutil.rmtree(dst)
            (stage / a.ident).rename(dst)
            written.append(dst)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    shared = [q for q in quotas if q]
    if shared:
        (out / "shared-cluster.yaml").write_text(yaml.safe_dump_all([d for q in shared for d in q], sort_keys=False))
    if plan.shared:
        fac = out / FACILITATOR
        fac.mkdir(exist_ok=True)
        header = f"# The facilitator's folder: the shared cluster sized for {plan.shared} attendee(s) by handout.\n"
        (fac / "env.yaml").write_text(
            header + yaml.safe_dump(workshop.sized(base, plan).public_dict(), sort_keys=False)
        )
    if plan.attendees:
        (out / "workshop-cost.txt").write_text(handout_workshop.plan_text(plan, list(notes)) + "\n")
    if room is not None:
        (out / "workshop-host.txt").write_text(handout_workshop.host_text(room) + "\n")
    index = [dict(asdict(a), settings=None, folder=a.ident, handout_id=handout_id) for a in attendees]
    (out / INDEX_FILE).write_text(json.dumps(index, indent=2))
    (out / INDEX_FILE).chmod(0o600)
    return written


def _write_record(out: Path, stage: Path, attendees: list[Attendee]) -> None:
    """The facilitator's record of what was handed out (``OUT/record/``, 0700, outside every attendee's folder):
    each attendee's env.yaml, namespace objects and access entry as written. ``handout status|namespaces|storage|
    teardown`` act on these, never on what an attendee's folder says now."""
    rec = out / RECORD_DIR
    if rec.exists():
        shutil.rmtree(rec)
    rec.mkdir(mode=0o700)
    for a in attendees:
        for name in RECORDED:
            src = stage / a.ident / name
            if src.is_file():
                dst = rec / f"{a.ident}.{name}"
                shutil.copyfile(src, dst)
                dst.chmod(0o600)


def _distinct_local(attendees: list[Attendee]) -> None:
    """Attendees on one JupyterHub host: no two may share a local port or raylet folder (a roster column can set
    them; the hand-out's own values never collide)."""
    seen: dict[Any, str] = {}
    for a in attendees:
        loc = a.settings.local
        for key, value in (("gcs_port", loc.gcs_port), ("dashboard_port", loc.dashboard_port), ("port", loc.gcs_port),
                           ("port", loc.dashboard_port), ("temp_root", loc.temp_root)):  # fmt: skip
            if (key, value) in seen and seen[(key, value)] != a.name:
                raise ConfigError(
                    f"row {a.row} ({a.name}): local {key} {value} is also {seen[(key, value)]}'s; nothing was written. "
                    "Fix: leave gcs_port, dashboard_port and temp_root out of the roster (the hand-out sets them)"
                )
            seen[(key, value)] = a.name


def _write_attendee(att: Attendee, folder: Path, gpu_quota: int | None, handout_id: str) -> list[dict[str, Any]]:
    import papermill

    folder.mkdir(parents=True)
    header = f"# {att.name} (roster row {att.row}): written by raytrain-tutorial handout.\n"
    body = yaml.safe_dump(att.settings.public_dict(), sort_keys=False)
    (folder / "env.yaml").write_text(header + body)
    nb_out = folder / "notebooks"
    nb_out.mkdir()
    params = dict(run_name=att.ident, target=for_settings(att.settings).NAME)
    for nb in sorted(notebooks_dir().glob("[0-9]*.ipynb")):
        papermill.execute_notebook(
            blank_notebook(nb),
            str(nb_out / nb.name),
            parameters=params,
            prepare_only=True,
            progress_bar=False,
            log_output=False,
        )
    if att.own_cluster or att.on_host:
        return []
    docs = namespace_quota(att.settings, gpu_quota, handout_id)
    (folder / "namespace.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    if att.principal_arn:
        entry = workshop_namespace.access_entry_request(att.settings, att.principal_arn, handout_id)
        (folder / "access-entry.json").write_text(json.dumps(entry, indent=2) + "\n")
    return docs


def blank_notebook(path: Path):
    """The notebook without the outputs it was committed with: the attendee starts from clean cells."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
        cell.metadata.pop("papermill", None)
    nb.metadata.pop("papermill", None)
    return nb


def namespace_quota(settings: Settings, gpus: int | None, handout_id: str = "") -> list[dict[str, Any]]:
    """The attendee's namespace on the shared cluster, confined by Kubernetes itself: Pod Security labels, a
    quota on GPUs, EFA, CPU and memory, a LimitRange, and the Role of the attendee's group
    (:func:`..plan.workshop_namespace.namespace_objects`)."""
    limit = gpus if gpus is not None else workshop.attendee_gpus(settings)
    return workshop_namespace.namespace_objects(settings, limit, handout_id)


def summary_table(attendees: list[Attendee]) -> str:
    rows = [
        [
            a.row,
            a.name,
            a.ident,
            a.settings.kubernetes.namespace,
            "local, on this host"
            if a.on_host
            else a.settings.aws.cluster_name + ("" if a.own_cluster else " (shared)"),
            a.settings.aws.region,
        ]
        for a in attendees
    ]
    return format_table(rows, ["row", "name", "folder / run", "namespace", "cluster", "region"])


# ---- progress ----------------------------------------------------------------------------------------------
def read_index(out: Path) -> list[dict[str, Any]]:
    """The attendees of a hand-out folder, as ``handout`` wrote them."""
    try:
        index = json.loads((out / INDEX_FILE).read_text())
    except (OSError, ValueError):
        index = None
    if not isinstance(index, list):
        raise ConfigError(f"{out} is not a hand-out folder (no {INDEX_FILE}). Fix: the --out folder of 'handout'")
    return index


def status_table(out: Path) -> str:
    """The folder's progress of every attendee (disk only; ``handout status`` adds the cluster's view)."""
    return handout_workshop.status_text(out, read_index(out), cluster=False)


__all__ = ["Attendee", "attendee_progress", "identifier", "read_index", "read_roster", "status_table", "write_handout"]
