"""Step 01 on the ``aws`` target: where can the GPU nodes run, and what will it cost?

For each region (the given ones, or every enabled one) :func:`capacity` reads, without creating anything:

* the AZs that offer ``gpu_node_type`` (``ec2:DescribeInstanceTypeOfferings``, per AZ);
* the type's facts (``ec2:DescribeInstanceTypes``): vCPUs, GPUs, GPU memory, EFA - a config whose
  ``gpus_per_node`` disagrees, or a type without EFA, is rejected;
* the On-Demand vCPU quota of the type's family (Service Quotas, falling back to the AWS default) minus
  the vCPUs of running/pending instances and of unused capacity reservations of that family; short
  regions get the exact ``aws service-quotas request-service-quota-increase`` command;
* Spot placement scores per AZ (a signal only; flagged when the Spot quota could not hold the nodes);
* whether the existing cluster (if any) has a private subnet in each AZ.

It ranks the AZs (probe-confirmed > quota ok with a cluster subnet > Spot score), saves the winner as the
placement (``runs/<run_name>/placement.json``) that step 02 and later read, plans the FSDP memory on the
type's real GPU memory and estimates the stack's hourly cost.

A call that fails (denied by a restricted IAM role, missing in the partition, throttled past botocore's retries,
a server error) is caught where it is made: the offerings, the instance facts, the regions, AZs and the cluster's
description are essential (one line naming the API, the IAM action and the fix); the quotas, the vCPUs in use,
the capacity reservations and the Spot scores are optional: each becomes a row "unavailable: <code> for <IAM
action>; <what the ranking uses instead>" and the step goes on.

``probe=True`` adds the one definitive test: an On-Demand Capacity Reservation for all the GPU nodes in
each candidate AZ, cancelled at once - only after confirmation (``assume_yes`` or an interactive yes),
and cancelled on every exit path (exceptions, Ctrl-C, kernel interrupt, SIGTERM), then verified by listing.

The modules: :mod:`.quotas` (quota classes, limits, vCPUs in use), :mod:`.region_scan` (the types' facts and
what each region offers), :mod:`.capacity_probe` (the reservation probe), :mod:`.capacity_report` (the rows and
the report); this one ranks the AZs, chooses and saves the placement, plans the memory and estimates the cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ....clients import aws as aws_client
from ....clients.aws import Identity
from ....core.config import ConfigError, Settings
from ....plan import cost
from ....plan.memory import plan_for
from .. import common
from .probe import cancel_probe_reservations, probe_az, probe_reservations, run_probes
from .quotas import INSTEAD, QUOTA_CLASSES, quota_class
from .region_scan import InstanceFacts, cluster_private_azs, scan_regions, type_facts
from .report import AzRow, CapacityReport

#: Names importers (tests, step 02's cluster code) read from this module; they live in the modules above.
__all__ = [
    "INSTEAD",
    "QUOTA_CLASSES",
    "CapacityReport",
    "cancel_probe_reservations",
    "capacity",
    "probe_az",
    "probe_reservations",
    "quota_class",
]


def _rank(rows: list[AzRow], settings_region: str) -> None:
    for r in rows:
        q = r.gpu_quota
        if r.probe == "no capacity":
            r.tier, r.verdict = 8, "no capacity now (probe)"
        elif q.ok is False:
            r.tier, r.verdict = 7, f"SHORT: quota {q.quota_class} {q.free:.0f} vCPU free < {q.need}"
        elif not r.eks_supported:
            r.tier, r.verdict = 6, "EKS control plane does not support this AZ"
        elif r.cluster_subnet is False:
            r.tier, r.verdict = 5, "no private subnet of the existing cluster here"
        elif r.probe == "confirmed":
            r.tier, r.verdict = 0, "ok: capacity confirmed by probe"
        elif q.ok is None:
            why = q.source if q.limit is None else "vCPUs in use unreadable"
            r.tier, r.verdict = 2, f"quota unknown ({why}): check it in the console"
        else:
            r.tier, r.verdict = 1, "ok" + (" (cluster subnet)" if r.cluster_subnet else "")
        if r.probe and r.probe.startswith("error"):
            r.verdict += f"; probe {r.probe}"
    rows.sort(key=lambda r: (r.tier, -(r.spot_score or 0), r.region != settings_region, r.region, r.az))


def _new_report(
    sess,
    settings: Settings,
    ident: Identity,
    scans: list[dict[str, Any]],
    region_list: list[str],
    facts: dict[str, InstanceFacts],
) -> CapacityReport:
    """The report with one row per AZ offering the GPU type, ranked."""
    a = settings.aws
    gf = facts[a.gpu_node_type]
    offered = [s for s in scans if s["gpu_azs"]]
    in_home = any(s["region"] == a.region for s in offered)
    subnets, cluster_state = cluster_private_azs(sess, settings) if in_home else (None, None)
    report = CapacityReport(
        account=ident.account,
        region=a.region,
        instance_type=a.gpu_node_type,
        gpu_node_count=a.gpu_node_count,
        facts=gf,
        system_facts=facts[a.system_node_type],
        regions_checked=region_list,
        not_offered=[s["region"] for s in scans if not s["gpu_azs"] and not s.get("skipped")],
        rows=[],
        recommendation=None,
        placement_file=None,
        plan=None,
        cost=None,
        system_quota={},
    )
    if subnets is not None:
        report.notes.append(
            f"existing cluster {a.cluster_name} ({cluster_state}) has private subnets in "
            f"{', '.join(subnets) or 'no AZ'}"
        )
    for s in scans:
        report.unavailable.extend(s["unavailable"])
    for s in offered:
        _add_region_rows(report, settings, s, gf, subnets)
    _rank(report.rows, a.region)
    if any(r.spot_capped for r in report.rows):
        report.notes.append(
            "Spot scores marked (capped): the Spot vCPU quota could not hold the nodes, so the "
            "score is not attainable; it is only a hint about spare capacity anyway"
        )
    return report


def _add_region_rows(
    report: CapacityReport,
    settings: Settings,
    scan: dict[str, Any],
    gf: InstanceFacts,
    subnets: dict[str, list[str]] | None,
) -> None:
    a = settings.aws
    region = scan["region"]
    report.notes.extend(scan["notes"])
    q = scan["quotas"]["gpu"]
    spot_cap = scan["spot_limit"] is not None and scan["spot_limit"] < a.gpu_node_count * gf.vcpus
    report.system_quota[region] = scan["quotas"]["system"]
    for az in scan["gpu_azs"]:
        az_id = scan["zones"].get(az, {}).get("id", "")
        row = AzRow(
            region=region,
            az=az,
            az_id=az_id,
            gpu_quota=q,
            spot_score=scan["scores"].get(az_id),
            spot_capped=spot_cap and az_id in scan["scores"],
            eks_supported=az_id not in common.EKS_UNSUPPORTED_AZ_IDS,
        )
        if region == a.region and subnets is not None:
            row.cluster_subnet = bool(subnets.get(az))
        report.rows.append(row)
    cmd = q.request_command(region)
    if cmd:
        report.quota_requests.append(cmd)


def _check_pinned_az(report: CapacityReport, settings: Settings) -> None:
    a = settings.aws
    if a.gpu_az and not any(r.region == a.region and r.az == a.gpu_az for r in report.rows):
        offered_here = [r.az for r in report.rows if r.region == a.region]
        raise ConfigError(
            f"aws.gpu_az (GPU_AZ) = {a.gpu_az!r} does not offer {a.gpu_node_type}. Fix: leave "
            f"gpu_az empty (this step picks one) or use one of {', '.join(offered_here) or '(none)'}"
        )


def _choose(report: CapacityReport, settings: Settings) -> AzRow | None:
    """The pinned AZ when usable, else the best-ranked viable one; a problem when there is none."""
    a = settings.aws
    if a.gpu_az:
        choice = next(r for r in report.rows if r.region == a.region and r.az == a.gpu_az)
        if choice.viable:
            return choice
        report.problems.append(
            f"gpu_az {a.gpu_az} is pinned in the settings but not usable: {choice.verdict}. Fix: clear gpu_az or "
            f"fix the cause"
        )
        return None
    if report.rows and report.rows[0].viable:
        return report.rows[0]
    report.problems.append(
        "no AZ has quota (and capacity) for the GPU nodes. Fix: request the quota "
        "increases listed, or try other regions / a smaller gpu_node_count"
    )
    return None


def _recommend(
    report: CapacityReport, settings: Settings, choice: AzRow, scans: list[dict[str, Any]], *, save: bool
) -> None:
    """Check the system node's quota and offering in the chosen region, then record (and save) the placement."""
    a = settings.aws
    sysq = report.system_quota.get(choice.region)
    if sysq is not None and sysq.ok is False:
        cmd = sysq.request_command(choice.region)
        report.problems.append(
            f"the system node ({a.system_node_count} x {a.system_node_type}) needs {sysq.need} "
            f"{sysq.quota_class} vCPUs in {choice.region}; {sysq.free:.0f} free. Fix: {cmd}"
        )
        if cmd and cmd not in report.quota_requests:
            report.quota_requests.append(cmd)
    scan = next(s for s in scans if s["region"] == choice.region)
    if not scan.get("sys_azs"):
        report.problems.append(
            f"{a.system_node_type} (system node) is not offered in {choice.region}. "
            f"Fix: choose another system_node_type"
        )
    source = "gpu_az" if a.gpu_az else ("probe" if choice.probe == "confirmed" else "ranked")
    report.recommendation = dict(
        region=choice.region,
        az=choice.az,
        az_id=choice.az_id,
        instance_type=a.gpu_node_type,
        gpu_node_count=a.gpu_node_count,
        account=report.account,
        source=source,
        probe_confirmed=choice.probe == "confirmed",
        # the viable AZs of the region, best first: where 02 falls back when EC2 has no capacity in ``az``
        ranked_azs=[r.az for r in report.rows if r.region == choice.region and r.viable],
        spot_score=choice.spot_score,
        decided_at=common.utcnow().isoformat(timespec="seconds"),
    )
    if choice.region != a.region:
        report.notes.append(
            f"the best AZ is in {choice.region}, not the settings' region {a.region}: set "
            f"`region: {choice.region}` in env.yaml (or -p region {choice.region}) before step 02"
        )
    if save:
        report.placement_file = str(common.save_placement(settings, report.recommendation))


def _plan_and_cost(report: CapacityReport, settings: Settings, region: str, prices: Any) -> None:
    """The FSDP memory plan on the type's real GPU memory, and the stack's hourly cost in ``region``."""
    a, gf = settings.aws, report.facts
    world = settings.train.num_workers or a.gpu_node_count * gf.gpus
    report.plan = plan_for(settings, world, on_gpu=True, device_mem_gib=gf.gpu_mem_gib)
    if report.plan.fits is False:
        report.problems.append(
            f"planned peak {report.plan.peak_per_device_gib:.1f} GiB per GPU exceeds 90% of "
            f"{gf.gpu_mem_gib:.1f} GiB. Fix: {'; '.join(report.plan.notes)}"
        )
    report.cost = cost.estimate(settings, region, prices)


def capacity(
    settings: Settings,
    *,
    probe: bool = False,
    assume_yes: bool = False,
    regions: Sequence[str] | str | None = None,
    prices: Any = None,
    save: bool = True,
) -> CapacityReport:
    """Notebook 01 on aws (also ``raytrain-tutorial capacity``): rank the AZs, save the placement, plan, cost.

    ``regions``: names (a list, or one string separated by spaces or commas); None: every enabled region.
    ``prices``: a price override (see :mod:`raytrain_helpers.plan.cost`). ``save=False`` saves no placement.
    """
    a = settings.aws
    if isinstance(regions, str):
        regions = regions.replace(",", " ").split()
    sess, ident = common.connect(settings)
    ec2_home = aws_client.client(sess, "ec2", a.region)
    region_list = common.validate_regions(ec2_home, regions, a.region)
    if a.gpu_az and a.region not in region_list:
        region_list = [a.region, *region_list]
    facts = type_facts(ec2_home, settings)
    scans = scan_regions(sess, settings, region_list, facts)
    report = _new_report(sess, settings, ident, scans, region_list, facts)
    _check_pinned_az(report, settings)
    if probe:
        run_probes(sess, settings, report, ident, prices=prices, assume_yes=assume_yes)
        _rank(report.rows, a.region)
    choice = _choose(report, settings)
    if choice is not None:
        _recommend(report, settings, choice, scans, save=save)
    _plan_and_cost(report, settings, choice.region if choice else a.region, prices)
    return report
