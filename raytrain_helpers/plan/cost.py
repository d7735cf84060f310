"""The stack's hourly cost: a small, dated price table, how to override it, and the estimate.

These are On-Demand list prices (USD per hour, Linux, shared tenancy) as published for us-east-1,
us-east-2 and us-west-2 at ``AS_OF``; other regions are usually 5-30 % dearer and are flagged as such.
Prices change (P4d/P5 were cut in June 2025): check https://aws.amazon.com/ec2/pricing/on-demand/ and
override any entry with ``prices={...}`` (a dict or a YAML/JSON file, CLI ``--prices FILE``) shaped like
``DEFAULTS``: ``{"instances": {"g6.12xlarge": 4.6016}, "regions": {"eu-west-1": {"g6.12xlarge": 5.1}},
"eks_control_plane": 0.10, "nat_gateway": 0.045}``.

The EKS control plane costs $0.10 per cluster-hour while its Kubernetes version is in standard support and $0.60
in extended support, a total, not a surcharge (AWS Containers blog, "Amazon EKS extended support for Kubernetes
versions pricing":
https://aws.amazon.com/blogs/containers/amazon-eks-extended-support-for-kubernetes-versions-pricing/
and https://aws.amazon.com/eks/pricing/; checked 2026-12-04). The tier comes from the dated calendar in
:mod:`raytrain_helpers.core.eks_versions` on the day passed as ``today`` (UTC today by default), and the estimate
carries a warning when the version is in extended support or within 30 days of it.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import eks_versions
from ..core.settings import Settings
from ..core.validation import ConfigError

AS_OF = "2025-07"
LIST_REGIONS = ("us-east-1", "us-east-2", "us-west-2")

DEFAULTS: dict[str, Any] = {
    "as_of": AS_OF,
    "currency": "USD",
    "instances": {
        # GPU worker types the tutorial knows (config.INSTANCE_TYPES)
        "g5.12xlarge": 5.672,
        "g5.48xlarge": 16.288,
        "g6.12xlarge": 4.6016,
        "g6.24xlarge": 6.6749,
        "g6.48xlarge": 13.3504,
        "g6e.12xlarge": 10.4926,
        "g6e.48xlarge": 30.1312,
        "p4d.24xlarge": 21.9576,
        "p4de.24xlarge": 27.4471,
        "p5.48xlarge": 55.04,
        # system node types
        "m7i.large": 0.1008,
        "m7i.xlarge": 0.2016,
        "m7i.2xlarge": 0.4032,
        "m6i.xlarge": 0.192,
        "m5.xlarge": 0.192,
    },
    # per-region overrides: {"eu-west-1": {"g6.12xlarge": 5.1}}
    "regions": {},
    "eks_control_plane": 0.10,  # per cluster-hour, standard support
    "eks_extended_support": 0.60,  # per cluster-hour, in extended support (instead of the above)
    "nat_gateway": 0.045,  # per gateway-hour, plus $0.045 per GB processed (not counted)
}


def load(prices: Mapping[str, Any] | str | Path | None = None) -> dict[str, Any]:
    """The defaults, with ``prices`` (a dict, or a YAML/JSON file) merged over them."""
    table = copy.deepcopy(DEFAULTS)
    if prices is None:
        return table
    if isinstance(prices, (str, Path)):
        p = Path(prices).expanduser()
        if not p.is_file():
            raise ConfigError(
                f"price file {p} does not exist. Fix: give a YAML/JSON file shaped like "
                f"raytrain_helpers.plan.cost.DEFAULTS"
            )
        import yaml

        try:
            over = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"price file {p} is not valid YAML/JSON: {e}") from None
        source = str(p)
    else:
        over, source = dict(prices), "prices="
    if not isinstance(over, Mapping):
        raise ConfigError(f"{source}: expected a mapping like raytrain_helpers.plan.cost.DEFAULTS")
    unknown = set(over) - set(DEFAULTS)
    if unknown:
        raise ConfigError(f"{source}: unknown price keys {sorted(unknown)}. Fix: use {sorted(DEFAULTS)}")
    for key, value in over.items():
        if key in ("instances",):
            table["instances"].update({k: _num(v, f"{source} instances.{k}") for k, v in value.items()})
        elif key == "regions":
            for region, entries in value.items():
                table["regions"].setdefault(region, {}).update(
                    {k: _num(v, f"{source} regions.{region}.{k}") for k, v in entries.items()}
                )
        elif key in ("eks_control_plane", "eks_extended_support", "nat_gateway"):
            table[key] = _num(value, f"{source} {key}")
        else:
            table[key] = value
    table["overridden"] = True
    return table


def _num(v: Any, where: str) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{where} = {v!r} is not a price (USD per hour)") from None
    if f < 0:
        raise ConfigError(f"{where} = {v!r} must not be negative")
    return f


def instance_price(table: Mapping[str, Any], instance_type: str, region: str) -> tuple[float | None, str]:
    """(USD/h or None, a note on where the figure comes from)."""
    regional = table.get("regions", {}).get(region, {})
    if instance_type in regional:
        return float(regional[instance_type]), f"{region} price"
    base = table.get("instances", {}).get(instance_type)
    if base is None:
        return None, f"no price for {instance_type}: pass prices={{'instances': {{'{instance_type}': USD_PER_HOUR}}}}"
    if region in LIST_REGIONS:
        return float(base), f"list price {table.get('as_of', AS_OF)}"
    return float(base), f"us-east-1 list price {table.get('as_of', AS_OF)}; {region} is usually dearer"


@dataclass
class CostEstimate:
    region: str
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # (item, qty, USD/h each, USD/h)
    total_per_hour: float = 0.0
    complete: bool = True
    notes: list[str] = field(default_factory=list)
    as_of: str = AS_OF
    #: What the plan must show (the Kubernetes version's support tier and its price).
    warnings: list[str] = field(default_factory=list)
    #: The Kubernetes version's EKS support, e.g. "Kubernetes 1.35: standard support until 2027-03-27".
    support: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dict(
            region=self.region,
            rows=[list(r) for r in self.rows],
            total_per_hour=self.total_per_hour,
            complete=self.complete,
            notes=list(self.notes),
            as_of=self.as_of,
            warnings=list(self.warnings),
            support=self.support,
        )


def estimate(
    settings: Settings,
    region: str,
    prices: Mapping[str, Any] | str | Path | None = None,
    *,
    today: dt.date | None = None,
) -> CostEstimate:
    """Hourly cost of the whole stack: GPU nodes, system node(s), EKS control plane (standard or extended
    support of ``aws.k8s_version`` on ``today``, UTC today by default), one NAT gateway."""
    table = load(prices)
    a = settings.aws
    est = CostEstimate(region=region, as_of=str(table.get("as_of", AS_OF)))
    items = [
        (f"GPU node {a.gpu_node_type}", a.gpu_node_type, a.gpu_node_count),
        (f"system node {a.system_node_type}", a.system_node_type, a.system_node_count),
    ]
    for label, itype, qty in items:
        price, note = instance_price(table, itype, region)
        if price is None:
            est.complete = False
            est.rows.append((label, str(qty), "?", "?"))
            est.notes.append(note)
            continue
        est.rows.append((label, str(qty), f"{price:.4f}", f"{price * qty:.2f}"))
        est.total_per_hour += price * qty
        if "dearer" in note and note not in est.notes:
            est.notes.append(note)
    plane = _control_plane(est, table, a.k8s_version, today or dt.datetime.now(dt.timezone.utc).date())
    for label, key in (plane, ("NAT gateway (single)", "nat_gateway")):
        price = float(table[key])
        est.rows.append((label, "1", f"{price:.4f}", f"{price:.2f}"))
        est.total_per_hour += price
    est.notes.append("excludes EBS volumes, NAT data processing ($/GB), data transfer and taxes")
    if table.get("overridden"):
        est.notes.append("prices partly overridden by the caller")
    return est


def _control_plane(est: CostEstimate, table: Mapping[str, Any], version: str, today: dt.date) -> tuple[str, str]:
    """The control plane row's label and price key; records the version's support and any warning in ``est``."""
    s = eks_versions.support(version, today)
    est.support = s.describe()
    warning = eks_versions.warning(
        version,
        today,
        standard_usd=float(table["eks_control_plane"]),
        extended_usd=float(table["eks_extended_support"]),
    )
    if warning:
        est.warnings.append(warning)
        est.notes.append(f"WARNING: {warning}")
    if s.tier == eks_versions.EXTENDED:
        return f"EKS control plane ({version}, extended support)", "eks_extended_support"
    return "EKS control plane", "eks_control_plane"


def to_json(est: CostEstimate) -> str:
    return json.dumps(est.as_dict(), indent=2)
