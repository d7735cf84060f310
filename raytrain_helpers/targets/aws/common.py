"""What every step of the ``aws`` target shares: errors, the account banner, confirmation, regions and AZs,
the cluster's subnets, the placement file, interrupt-safe sections and waits.

Billable or destructive actions go through :func:`confirm`: ``assume_yes=True``, or an interactive "yes" when a
person can answer (a TTY, or a notebook kernel that allows input). A headless run without ``assume_yes`` is
refused with a message that says how to allow it; papermill runs never prompt.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ...clients import aws as aws_client
from ...clients.aws import AwsError, Identity
from ...clients.eksctl import kernel_allows_input, progress
from ...core.paths import runs_dir
from ...core.settings import Settings
from ...core.validation import ConfigError

#: A tag on everything this tutorial creates outside eksctl (capacity probes), so leftovers can be found.
TAG_KEY = "raytrain-tutorial"
PROBE_TAG_KEY = "raytrain-tutorial/probe"
#: AZ IDs where the EKS control plane cannot place its network interfaces (EKS user guide).
EKS_UNSUPPORTED_AZ_IDS = frozenset({"use1-az3", "usw1-az2", "cac1-az3"})


class AwsTargetError(AwsError):
    """Something on the AWS side failed or is in a state this step cannot continue from."""


class ConfirmationRefused(AwsTargetError):
    """A billable or destructive action was not confirmed."""


class WaitTimeout(AwsTargetError):
    """A resource stayed in a transitional state for too long (stuck)."""

    def __init__(self, message: str, state: str, nodegroup: str | None = None) -> None:
        super().__init__(message)
        self.state = state
        #: The node group waited for (None: the cluster).
        self.nodegroup = nodegroup


# --------------------------------------------------------------------------------------------------------------
# Sessions and the account banner
# --------------------------------------------------------------------------------------------------------------


def region_note(settings: Settings) -> str | None:
    """env.yaml's region is the one used; say so when the shell's AWS region differs."""
    env_region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if env_region and env_region != settings.aws.region:
        return (
            f"note: using region {settings.aws.region} from the settings; the environment says "
            f"{env_region} (AWS_REGION/AWS_DEFAULT_REGION). Change it with `-p region {env_region}` "
            f"or RAYTRAIN_REGION={env_region}"
        )
    return None


def connect(settings: Settings) -> tuple[Any, Identity]:
    """A session in the settings' region and who it is, both printed (the region note first, if any)."""
    note = region_note(settings)
    if note:
        print(note)
    sess = aws_client.session(settings.aws.region)
    ident = aws_client.identity(sess, settings.aws.region)
    print(ident.line())
    return sess, ident


def utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


# --------------------------------------------------------------------------------------------------------------
# Confirmation
# --------------------------------------------------------------------------------------------------------------


def interactive() -> bool:
    """Can a person answer a prompt (a TTY, or a notebook kernel that allows input)?"""
    try:
        if sys.stdin is not None and sys.stdin.isatty():
            return True
    except (ValueError, AttributeError):
        pass
    return kernel_allows_input()


def confirm(
    what: str,
    ident: Identity,
    *,
    assume_yes: bool,
    details: Sequence[str] = (),
    input_fn: Callable[[str], str] | None = None,
) -> None:
    """Show the account, region and action; return when confirmed, raise ConfirmationRefused otherwise."""
    print(f"About to: {what}")
    print(f"  in {ident.line()}")
    for d in details:
        print(f"  - {d}")
    if assume_yes:
        print("  confirmed by assume_yes=True / --yes")
        return
    if input_fn is None and not interactive():
        raise ConfirmationRefused(
            f"refusing to {what} without confirmation in a non-interactive run. "
            f"Fix: pass assume_yes=True (notebook parameter assume_yes, CLI --yes) after checking the "
            f"account and region above"
        )
    answer = (input_fn or input)("Type 'yes' to continue: ").strip().lower()
    if answer not in ("yes", "y"):
        raise ConfirmationRefused(f"not confirmed ({answer!r}): nothing was done")


# --------------------------------------------------------------------------------------------------------------
# Regions and AZs
# --------------------------------------------------------------------------------------------------------------


def enabled_regions(ec2) -> list[str]:
    """The regions enabled for this account (essential: ``ec2:DescribeRegions``)."""
    resp = aws_client.essential_call(ec2, "describe_regions", AllRegions=False)
    return sorted(r["RegionName"] for r in resp["Regions"])


def validate_regions(ec2, wanted: Iterable[str] | None, default_region: str) -> list[str]:
    """The regions to look at: each must exist and be enabled for this account."""
    enabled = enabled_regions(ec2)
    if wanted is None:
        return enabled
    wanted = [w.strip() for w in wanted if w and w.strip()]
    if not wanted:
        return [default_region]
    known = set(enabled)
    every_region = aws_client.optional_call(  # only a nicer message
        ec2, "describe_regions", instead="opt-in regions are reported as unknown", default={}, AllRegions=True
    )
    every = {r["RegionName"] for r in every_region.value.get("Regions", [])} or known
    for w in wanted:
        if w in known:
            continue
        if w in every:
            raise ConfigError(
                f"region {w!r} is not enabled for this account (an opt-in region). Fix: enable "
                f"it in the AWS console (Account > AWS Regions) or drop it from --regions"
            )
        raise ConfigError(f"unknown region {w!r}. Fix: use enabled regions such as {', '.join(sorted(known)[:8])}")
    return list(dict.fromkeys(wanted))


def zones(ec2) -> dict[str, dict[str, Any]]:
    """AZ name -> {id, state, opt_in} for the client's region (availability zones only)."""
    out = {}
    resp = aws_client.essential_call(ec2, "describe_availability_zones", AllAvailabilityZones=False)
    for z in resp["AvailabilityZones"]:
        if z.get("ZoneType", "availability-zone") != "availability-zone":
            continue
        out[z["ZoneName"]] = dict(
            id=z.get("ZoneId", ""),
            state=z.get("State", "available"),
            opt_in=z.get("OptInStatus", "opt-in-not-required"),
        )
    return out


def offering_azs(ec2, instance_type: str) -> list[str]:
    """The AZs of the client's region that offer ``instance_type``."""
    offerings = aws_client.paginate(
        ec2,
        "describe_instance_type_offerings",
        "InstanceTypeOfferings",
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": [instance_type]}],
    )
    return sorted({o["Location"] for o in offerings})


# --------------------------------------------------------------------------------------------------------------
# Cluster networking as it really is
# --------------------------------------------------------------------------------------------------------------


def private_subnets_by_az(ec2, subnet_ids: Sequence[str]) -> dict[str, list[str]]:
    """AZ -> private subnet ids among ``subnet_ids``.

    A subnet is private when its route table (explicit association, else the VPC's main table) sends
    0.0.0.0/0 anywhere but an internet gateway (e.g. a NAT gateway) or nowhere at all.
    """
    if not subnet_ids:
        return {}
    subnets = aws_client.essential_call(ec2, "describe_subnets", SubnetIds=list(subnet_ids))["Subnets"]
    vpcs = sorted({s["VpcId"] for s in subnets})
    tables = aws_client.paginate(
        ec2, "describe_route_tables", "RouteTables", Filters=[{"Name": "vpc-id", "Values": vpcs}]
    )
    explicit: dict[str, dict] = {}
    main: dict[str, dict] = {}
    for t in tables:
        for a in t.get("Associations", []):
            if a.get("Main"):
                main[t["VpcId"]] = t
            elif a.get("SubnetId"):
                explicit[a["SubnetId"]] = t
    out: dict[str, list[str]] = {}
    for s in subnets:
        table = explicit.get(s["SubnetId"]) or main.get(s["VpcId"])
        if not _is_public(s, table):
            out.setdefault(s["AvailabilityZone"], []).append(s["SubnetId"])
    return {k: sorted(v) for k, v in sorted(out.items())}


def _is_public(subnet: dict[str, Any], table: dict[str, Any] | None) -> bool:
    if table is None:
        return bool(subnet.get("MapPublicIpOnLaunch"))
    return any(
        r.get("DestinationCidrBlock") == "0.0.0.0/0" and str(r.get("GatewayId", "")).startswith("igw-")
        for r in table.get("Routes", [])
    )


# --------------------------------------------------------------------------------------------------------------
# Placement: the (region, AZ) decided by step 01 and read by every later step
# --------------------------------------------------------------------------------------------------------------


def placement_path(settings: Settings) -> Path:
    """``runs/<run_name>/placement.json`` next to env.yaml."""
    return runs_dir(settings) / settings.run_name / "placement.json"


def load_placement(settings: Settings) -> dict[str, Any] | None:
    p = placement_path(settings)
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"{p} is not valid JSON ({e}). Fix: delete it and re-run step 01 (capacity)") from None
    for k in ("region", "az", "instance_type"):
        if not data.get(k):
            raise ConfigError(f"{p} lacks {k!r}. Fix: delete it and re-run step 01 (capacity)")
    return data


def save_placement(settings: Settings, data: dict[str, Any]) -> Path:
    p = placement_path(settings)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, p)
    return p


# --------------------------------------------------------------------------------------------------------------
# Interrupts: run a critical section to its cleanup even when Ctrl-C / kernel interrupt / SIGTERM arrive
# --------------------------------------------------------------------------------------------------------------


class DeferredInterrupt:
    """Within the block, SIGINT and SIGTERM are recorded instead of raised; call :meth:`reraise` after cleanup."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def _handler(self, signum, frame) -> None:  # noqa: ANN001
        if self.signum is None:
            print(f"\ninterrupt ({signal.Signals(signum).name}) received: finishing cleanup first", flush=True)
        self.signum = signum

    def __enter__(self) -> DeferredInterrupt:
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                try:
                    self._old[s] = signal.signal(s, self._handler)
                except (ValueError, OSError):  # pragma: no cover - exotic embedding
                    pass
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old.clear()

    def reraise(self) -> None:
        if self.signum == signal.SIGINT:
            raise KeyboardInterrupt
        if self.signum == signal.SIGTERM:
            raise SystemExit(128 + signal.SIGTERM)


# --------------------------------------------------------------------------------------------------------------
# Waiting for a state
# --------------------------------------------------------------------------------------------------------------


def wait_until(
    fetch: Callable[[], str],
    *,
    done: Callable[[str], bool],
    desc: str,
    timeout: float,
    every: float,
    nodegroup: str | None = None,
) -> str:
    """Poll ``fetch()`` (a state string) until ``done(state)``; a progress bar shows state and elapsed time.

    :class:`WaitTimeout` (carrying ``nodegroup``, the node group waited for) after ``timeout`` seconds.
    """
    bar = progress(desc)
    start = time.monotonic()
    try:
        while True:
            state = fetch()
            bar.set(state)
            if done(state):
                return state
            if time.monotonic() - start > timeout:
                raise WaitTimeout(f"{desc}: still {state} after {timeout / 60:.1f} min", state, nodegroup)
            slept = 0.0
            while slept < every:
                time.sleep(min(0.2, every))
                slept += min(0.2, every)
                bar.tick()
    finally:
        bar.close()
