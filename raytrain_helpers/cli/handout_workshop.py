"""The facilitator's side of ``raytrain-tutorial handout``: the account's vCPU quota against the workshop, the
attendees' progress read from their folders and from the cluster, one HTML report of all of them, and the
storage each attendee's pods use (one association per namespace), and the teardown of what the hand-out created.

Everything that touches a cluster or the account goes through the target (``for_settings(settings)``):
``preflight`` for the quota, ``attendee_state`` for an attendee's RayCluster and RayJob, ``attendee_storage`` for
their checkpoint storage, ``remove_namespace`` and ``teardown`` for the teardown.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import yaml

from ..core.loading import load
from ..core.settings import Settings
from ..core.tables import format_table
from ..core.validation import ConfigError
from ..plan import workshop
from ..targets import for_settings
from .handout_progress import attendee_progress, inside
from .report import export_html

#: The facilitator's folder in a hand-out: the shared cluster's settings, sized for every attendee.
FACILITATOR = "facilitator"
#: The facilitator's record of the hand-out (``OUT/record/<attendee>.<file>``, 0700): what every action acts on.
RECORD_DIR = "record"
RECORDED = ("env.yaml", "namespace.yaml", "access-entry.json")
#: The settings an action of the facilitator's acts on (which cluster, namespace, processes): an attendee's
#: env.yaml that differs from the record in one of them is refused, not followed.
ACTING_GROUPS = ("aws", "kubernetes", "local")
ACTING_KEYS = ("target", "run_name")


# ---- the account ------------------------------------------------------------------------------------------------
def check_account(base: Settings, wp: workshop.WorkshopPlan, *, offline: bool = False) -> list[str]:
    """The target's preflight quota rows for every node the workshop starts in ``base``'s region (the shared
    cluster sized for everyone, plus the attendees' own clusters there); raises (nothing written) when a quota is
    short, else returns notes (e.g. that the quota was not checked)."""
    if offline:
        return ["the account's vCPU quota was NOT checked (--offline): run without it, with AWS credentials"]
    if for_settings(base).STANDS_IN_FOR is not None or not wp.vcpus:
        return []  # a stand-in (the local target) starts nothing in an account whose quota the workshop could exceed
    check = workshop.sized(base, wp)
    gpu, sys_ = base.aws.gpu_node_type, base.aws.system_node_type
    aws = check.aws.model_copy(
        update=dict(
            gpu_node_count=max(1, wp.vcpus.get(gpu, 0) // workshop.vcpus_of(gpu)),
            system_node_count=max(1, wp.vcpus.get(sys_, 0) // workshop.vcpus_of(sys_)),
        )
    )
    rows = [r for r in for_settings(base).preflight(check.model_copy(update=dict(aws=aws))).rows if "quota" in r.what]
    short = [r for r in rows if r.blocks]
    if short:
        raise ConfigError(
            "the account's vCPU quota cannot hold this workshop; nothing was written:\n  "
            + "\n  ".join(f"{r.what}: has {r.found}, needs {r.needed}. Fix: {r.fix or 'ask for more'}" for r in short)
        )
    unknown = [r for r in rows if r.status == "unknown"]
    if not rows:
        return ["the account's vCPU quota was NOT checked (no AWS credentials here): check it before the workshop"]
    return [f"{r.what}: not checked ({r.found}; {r.fix})" for r in unknown] + [
        f"{r.what}: {r.found}, the workshop needs {r.needed}" for r in rows if r.status == "ok"
    ]


def plan_text(wp: workshop.WorkshopPlan, notes: list[str]) -> str:
    """The shared cluster's size, each namespace's quota, the cost estimate and what it assumes."""
    lines = [
        f"workshop: {wp.attendees} attendee(s), {wp.shared} on the shared cluster",
        f"shared cluster: {wp.gpu_nodes} GPU node(s), {wp.system_nodes} system node(s) (one Ray head each)",
        *(f"  namespace {ns}: GPU quota {n}" for ns, n in wp.gpu_quota.items()),
        "vCPUs started: " + (", ".join(f"{n} on {t}" for t, n in wp.vcpus.items()) or "none"),
        f"cost estimate: USD {wp.cost_per_hour:.2f}/h, about USD {wp.cost_total:.0f} for {wp.hours:g} h"
        + ("" if wp.cost_complete else " (INCOMPLETE: a price is unknown, see plan/cost.py)"),
        "  the estimate assumes:",
        *(f"  - {a}" for a in wp.cost_assumes),
        *(f"note: {n}" for n in notes),
    ]
    return "\n".join(lines)


def host_room(attendees: list[Settings], host: dict[str, float]) -> tuple[workshop.HostPlan | None, set[str]]:
    """The attendees whose clusters run on the hand-out's host (their target's ``workshop_host``), planned against
    the host (``host`` replaces what this machine reads), and the run names of the others (planned as a cloud
    cluster)."""
    on_host = [s for s in attendees if for_settings(s).workshop_host([s]) is not None]
    cloud = {s.run_name for s in attendees} - {s.run_name for s in on_host}
    if not on_host:
        return None, cloud
    needs, have = for_settings(on_host[0]).workshop_host(on_host)
    return workshop.host_plan(needs, {**have, **host}), cloud


def host_text(room: workshop.HostPlan) -> str:
    """The room's host: each resource the attendees' clusters take against what the host has."""
    lines = [f"one host for {room.attendees} attendee(s): no cloud cluster, nothing billed by this tutorial"]
    for key, what, unit in workshop.HOST_RESOURCES:
        have = room.host.get(key, float("nan"))
        lines.append(
            f"  {what}: {room.need[key]:.1f}{unit} needed, host has "
            + (f"{have:.1f}{unit}" if have == have else "unknown")
        )
    lines.append(f"  ports (each attendee's GCS and dashboard, on this host): {', '.join(map(str, room.ports))}")
    lines.append("  the estimate assumes: 01's figures for each attendee's cluster (CPU cores its workers ask for, "
                 "memory of Ray and the training workers), the object store spilling to disk up to its size per node, "
                 "and 2 GiB of logs and checkpoints each")  # fmt: skip
    return "\n".join(lines)


# ---- the record -----------------------------------------------------------------------------------------------
def recorded(out: Path, entry: dict[str, Any], name: str) -> Path:
    """The facilitator's record of one attendee's hand-out file (``name``: one of :data:`RECORDED`)."""
    return out / RECORD_DIR / f"{entry['folder']}.{name}"


def attendee_settings(out: Path, entry: dict[str, Any]) -> Settings:
    """An attendee's settings as the hand-out wrote them (the facilitator's record); refused when the attendee's
    own env.yaml now says otherwise in a setting the facilitator acts on (:data:`ACTING_GROUPS`)."""
    path = recorded(out, entry, "env.yaml")
    if not path.is_file():
        raise ConfigError(
            f"{path} is missing: no record of what was handed out to {entry['name']}, so nothing is done for them. "
            f"Fix: write the hand-out again (handout --roster ... --out {out})"
        )
    settings = load(str(path), environ={}, check_installed_ray=False)
    theirs = out / entry["folder"] / "env.yaml"
    changed = _changed(settings, theirs)
    if changed:
        raise ConfigError(
            f"{entry['name']}'s {theirs} changes {changed} since the hand-out: refused, nothing done for "
            f"{entry['name']} (the facilitator acts only on what it handed out, recorded in {path}). Fix: put the "
            "handed-out values back in the attendee's env.yaml"
        )
    return settings


def _changed(settings: Settings, theirs: Path) -> str:
    """What of the acting settings the attendee's env.yaml changed ('' when nothing)."""
    try:
        now = load(str(theirs), environ={}, check_installed_ray=False).public_dict() if theirs.is_file() else None
    except ConfigError as e:
        return f"everything (it no longer loads: {str(e)[:120]})"
    if now is None:
        return "everything (it is missing)"
    was = settings.public_dict()
    diffs = [f"{k}: {was[k]!r} -> {now[k]!r}" for k in ACTING_KEYS if was[k] != now[k]]
    for group in ACTING_GROUPS:
        diffs += [f"{k}: {v!r} -> {now[group].get(k)!r}" for k, v in was[group].items() if now[group].get(k) != v]
    return "; ".join(diffs)


def status_rows(out: Path, index: list[dict[str, Any]], *, cluster: bool = True) -> list[list[Any]]:
    """One row per attendee: the folder's progress, then (``cluster``) the RayCluster and RayJob the cluster
    reports for them (through the target: ``-`` where the target has nothing beyond the folder). An attendee whose
    env.yaml changed what the facilitator acts on gets the refusal in those columns."""
    rows = []
    for a in index:
        p = attendee_progress(out / a["folder"], a["ident"])
        row = [a["row"], a["name"], p["notebook"], p["failure"], p["job"], p["verdict"], p["ago"]]
        if cluster:
            try:
                s = attendee_settings(out, a)
            except ConfigError as e:
                rows.append(row + [f"REFUSED: {e}", "-", "-"])
                continue
            state = for_settings(s).attendee_state(s)
            storage = "-" if a["own_cluster"] else for_settings(s).attendee_storage(s, "status")[1]
            row += [state.get("cluster", "-"), state.get("job", "-"), storage]
        rows.append(row)
    return rows


HEADERS = ["row", "name", "last notebook", "last failure", "last job", "06 verdict", "last activity"]
CLUSTER_HEADERS = ["Ray cluster (live)", "RayJob (live)", "storage (live)"]


def status_text(out: Path, index: list[dict[str, Any]], *, cluster: bool = True) -> str:
    headers = HEADERS + (CLUSTER_HEADERS if cluster else [])
    return format_table(status_rows(out, index, cluster=cluster), headers)


# ---- the subcommands --------------------------------------------------------------------------------------------
def action(name: str, out: Path, index: list[dict[str, Any]], *, yes: bool = False) -> int:
    """``handout status|report|namespaces|storage|teardown DIR``."""
    if name == "status":
        print(status_text(out, index))
        return 0
    if name == "report":
        path = write_workshop_report(out, index)
        print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
        return 0
    step = {"namespaces": create_namespaces, "storage": share_storage}.get(name)
    rows = step(out, index) if step else teardown(out, index, yes=yes)
    for who, what, done, evidence in rows:
        print(f"{'done' if done == 'yes' else 'NOT DONE'}: {who}, {what}: {evidence}")
    return 0 if all(r[2] == "yes" for r in rows) else 1


def facilitator_settings(out: Path) -> Settings:
    """The shared cluster's settings, from the facilitator's folder the hand-out wrote."""
    path = out / FACILITATOR / "env.yaml"
    if not path.is_file():
        raise ConfigError(
            f"{path} is missing: no attendee shares the base cluster, or the hand-out is older. Fix: write the "
            f"hand-out again (handout --roster ... --out {out})"
        )
    return load(str(path), environ={}, check_installed_ray=False)


def _each(out: Path, index: list[dict[str, Any]], step) -> list[list[str]]:
    """``step(entry, settings)``'s rows for every attendee; one whose record is missing or whose env.yaml changed
    what the facilitator acts on gets one refused row, and nothing is done for them."""
    rows: list[list[str]] = []
    for a in index:
        try:
            s = attendee_settings(out, a)
        except ConfigError as e:
            rows.append([a["name"], "everything", "NO", str(e)])
            continue
        rows += step(a, s)
    return rows


def share_storage(out: Path, index: list[dict[str, Any]]) -> list[list[str]]:
    """Every shared-cluster attendee's pods get the facilitator's checkpoint storage, each kept to their own
    namespace's prefix (through the target: ``attendee_storage(..., "share")``). Own clusters have their own 02."""
    fac = facilitator_settings(out) if any(not a["own_cluster"] and not a.get("on_host") for a in index) else None

    def step(a: dict[str, Any], s: Settings) -> list[list[str]]:
        if a["own_cluster"]:
            return [[a["name"], "storage", "yes", "own cluster: its own 02 prepares its storage"]]
        done, said = for_settings(s).attendee_storage(s, "share", facilitator=fac)
        return [[a["name"], f"storage of namespace {s.kubernetes.namespace}", "yes" if done else "NO", said]]

    return _each(out, index, step)


#: The UIDs of the namespaces ``handout namespaces`` created, by attendee run name (in the hand-out folder).
NAMESPACES_FILE = "namespaces.json"


def created_namespaces(out: Path) -> dict[str, str]:
    try:
        record = json.loads((out / NAMESPACES_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def recorded_objects(out: Path, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The attendee's namespace objects as the hand-out wrote them (the record, never their folder's copy)."""
    path = recorded(out, entry, "namespace.yaml")
    return [d for d in yaml.safe_load_all(path.read_text()) if d] if path.is_file() else []


def recorded_access(out: Path, entry: dict[str, Any]) -> dict[str, Any] | None:
    """The attendee's EKS access entry request as the hand-out wrote it (None: no principal_arn)."""
    path = recorded(out, entry, "access-entry.json")
    return json.loads(path.read_text()) if path.is_file() else None


def create_namespaces(out: Path, index: list[dict[str, Any]]) -> list[list[str]]:
    """Every shared-cluster attendee's namespace with its quota, limits, Pod Security labels and RBAC, and their
    access entry (the hand-out's record of both), created through the target; a namespace that exists and that this
    hand-out did not create is refused. The UID of each one created is recorded: ``handout teardown`` deletes only
    those."""
    record = created_namespaces(out)

    def step(a: dict[str, Any], s: Settings) -> list[list[str]]:
        if a["own_cluster"]:
            return [[a["name"], "namespace", "yes", "own cluster: its own 04 creates its namespace"]]
        objects = recorded_objects(out, a)
        done, said, uid = for_settings(s).create_namespace(s, objects, uid=record.get(s.run_name, ""))
        if done and uid:
            record[s.run_name] = uid
            (out / NAMESPACES_FILE).write_text(json.dumps(record, indent=2, sort_keys=True))
        rows = [[a["name"], f"namespace {s.kubernetes.namespace}", "yes" if done else "NO", said]]
        if done:
            ok, said = for_settings(s).attendee_access(s, "create", request=recorded_access(out, a))
            rows.append([a["name"], "access entry", "yes" if ok else "NO", said])
        return rows

    return _each(out, index, step)


def teardown(out: Path, index: list[dict[str, Any]], *, yes: bool = False) -> list[list[str]]:
    """Every shared-cluster attendee's namespace (the hand-out's only, with the cluster-scoped objects of its
    record), access entry (the record's, while tagged by this hand-out) and storage association (the hand-out's
    tagged one only), and with ``yes`` every attendee's own cluster (through their target's teardown). The shared
    cluster itself is the facilitator's folder's 08."""
    record = created_namespaces(out)

    def step(a: dict[str, Any], s: Settings) -> list[list[str]]:
        target = for_settings(s)
        if not a["own_cluster"]:
            objects = recorded_objects(out, a)
            done, said = target.remove_namespace(s, assume_yes=True, uid=record.get(s.run_name, ""), objects=objects)
            rows = [[a["name"], f"namespace {s.kubernetes.namespace}", "yes" if done else "NO", said]]
            if done and record.pop(s.run_name, None):  # gone: nothing of it left for a later teardown
                (out / NAMESPACES_FILE).write_text(json.dumps(record, indent=2, sort_keys=True))
            done, said = target.attendee_access(s, "remove", request=recorded_access(out, a))
            rows.append([a["name"], "access entry", "yes" if done else "NO", said])
            done, said = target.attendee_storage(s, "remove")
            return rows + [[a["name"], "storage association", "yes" if done else "NO", said]]
        if not yes:
            return [[a["name"], f"own cluster {s.aws.cluster_name}", "NO", "kept: pass --yes to delete it"]]
        res = target.teardown(s, assume_yes=True)
        res.show()
        return [[a["name"], f"own cluster {s.aws.cluster_name}", "yes" if res.ok else "NO", "see above"]]

    return _each(out, index, step)


def write_workshop_report(out: Path, index: list[dict[str, Any]], html: Path | None = None) -> Path:
    """One inert HTML page (:func:`.report.export_html`): the status table, then each attendee's executed
    notebooks under their name, read only from inside their own folder (a link out of it is skipped)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    table = status_text(out, index)
    nb.cells.append(nbformat.v4.new_markdown_cell(f"# Workshop `{out.name}`\n\n```\n{table}\n```"))
    for a in index:
        folder = out / a["folder"]
        nb.cells.append(nbformat.v4.new_markdown_cell(f"---\n\n# {a['name']} (`{a['folder']}`)"))
        nb.cells.append(nbformat.v4.new_markdown_cell(progress_markdown(attendee_progress(folder, a["ident"]))))
        parts = [(p, part) for p in attendee_notebooks(folder, a["ident"]) if (part := _read_inside(folder, p))]
        if not any(c.get("execution_count") for _, part in parts for c in part.cells if c.cell_type == "code"):
            nb.cells.append(nbformat.v4.new_markdown_cell("No notebook run yet."))
            continue
        for path, part in parts:
            nb.cells.append(nbformat.v4.new_markdown_cell(f"*From `{path.relative_to(folder)}`*"))
            nb.cells.extend(part.cells)
    return export_html(nb, html or out / "workshop-report.html")


def progress_markdown(p: dict[str, Any]) -> str:
    """The attendee's progress, then 06's verification table, as Markdown whose every value is escaped text."""
    lines = ["| | |", "|---|---|"]
    for key, label in (("notebook", "last notebook"), ("failure", "last failure"), ("job", "last job"),
                       ("verdict", "06 verdict"), ("ago", "last activity")):  # fmt: skip
        lines.append(f"| {label} | {_cell(p[key])} |")
    if p["rows"]:
        lines += ["", "**06's verification**", "", "| result | criterion | evidence |", "|---|---|---|"]
        lines += [f"| {_cell(r.get('status'))} | {_cell(r.get('criterion'))} | {_cell(r.get('evidence'))} |"
                  for r in p["rows"]]  # fmt: skip
    return "\n".join(lines)


def _cell(value: Any) -> str:
    """Text in a Markdown table cell, shown as it is: HTML escaped, Markdown's own characters backslashed."""
    text = html.escape(str(value if value is not None else "-")).replace("\n", " ")
    return "".join("\\" + ch if ch in "\\`*_{}[]()#+-.!|~<>" else ch for ch in text)[:600]


def attendee_notebooks(folder: Path, run_name: str) -> list[Path]:
    """The attendee's notebooks: those saved in their folder, else the executed copies of their run folder."""
    saved = sorted(p for p in (folder / "notebooks").glob("[0-9]*.ipynb") if inside(folder, p))
    ran = sorted(p for p in (folder / "runs" / run_name / "notebooks").glob("[0-9]*.ipynb") if inside(folder, p))
    by_name = {p.name: p for p in saved}
    for p in ran:  # an executed copy wins over a saved notebook that was never run
        if not any(c.get("execution_count") for c in _code_of(by_name.get(p.name))):
            by_name[p.name] = p
    return [by_name[k] for k in sorted(by_name)]


def _code_of(path: Path | None) -> list[dict[str, Any]]:
    if path is None:
        return []
    try:
        return [c for c in json.loads(path.read_text()).get("cells", []) if c.get("cell_type") == "code"]
    except (OSError, ValueError, AttributeError):
        return []


def _read_inside(folder: Path, path: Path):
    import nbformat

    if not inside(folder, path):
        return None
    try:
        return nbformat.reads(path.read_text(), as_version=4)
    except Exception:  # noqa: BLE001 - whatever an attendee's file holds, the report goes on without it
        return None


__all__ = [
    "action",
    "attendee_notebooks",
    "progress_markdown",
    "attendee_progress",
    "attendee_settings",
    "FACILITATOR",
    "NAMESPACES_FILE",
    "RECORDED",
    "RECORD_DIR",
    "check_account",
    "create_namespaces",
    "created_namespaces",
    "facilitator_settings",
    "plan_text",
    "host_room",
    "host_text",
    "recorded",
    "recorded_access",
    "recorded_objects",
    "share_storage",
    "status_rows",
    "status_text",
    "teardown",
    "write_workshop_report",
]
