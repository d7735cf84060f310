"""Amazon EKS Kubernetes versions, offline: the release calendar, the support tier of a version on a date, and the
warning the cost estimate shows when the chosen version costs extended support.

Only the offline cost estimate (``plan``, ``raytrain-tutorial cost``: no credentials, no AWS call) reads this table.
With credentials, the aws preflight asks EKS itself (``DescribeClusterVersions``: each version's status and end of
support dates in the region, :func:`raytrain_helpers.targets.aws.preflight.k8s_version_row`) before anything is
created, so a version newer than this table, or a date EKS moved, is judged by EKS's answer.

Sources (checked 2026-12-04):

* The EKS user guide, "Understand the Kubernetes version lifecycle on EKS", release calendar
  (https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html; source file
  awsdocs/amazon-eks-user-guide latest/ug/versioning/kubernetes-versions.adoc, commit 8596db85 for 1.27-1.33),
  and endoflife.date/amazon-eks, which carries the same dates for 1.34 and 1.35. Standard support lasts 14 months
  from the EKS release, extended support 12 more; "Billing for extended support starts at the beginning of the
  day that the version reaches end of standard support, in the UTC+0 timezone". After the end of extended
  support EKS creates no new cluster of that version and upgrades existing ones.
* 1.36 is in EKS standard support on 2026-12-04 but its dates could not be read from a published source here:
  it is not in the table (a version newer than the table is taken as standard support, with a note).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

#: When the table below was checked against its sources.
CHECKED = "2026-12-04"
#: Where the dates come from.
SOURCE = "EKS user guide, Kubernetes versions, release calendar"
#: version -> (end of standard support, end of extended support); UTC dates, the tier changes at 00:00 UTC.
CALENDAR: dict[str, tuple[dt.date, dt.date]] = {
    "1.29": (dt.date(2025, 3, 23), dt.date(2026, 3, 23)),
    "1.30": (dt.date(2025, 7, 23), dt.date(2026, 7, 23)),
    "1.31": (dt.date(2025, 11, 26), dt.date(2026, 11, 26)),
    "1.32": (dt.date(2026, 3, 23), dt.date(2027, 3, 23)),
    "1.33": (dt.date(2026, 7, 29), dt.date(2027, 7, 29)),
    "1.34": (dt.date(2026, 12, 2), dt.date(2027, 12, 2)),
    "1.35": (dt.date(2027, 3, 27), dt.date(2028, 3, 27)),
}
#: Warn this many days before a version leaves standard support.
WARN_DAYS = 30

STANDARD, EXTENDED, ENDED = "standard", "extended", "ended"


def _key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


@dataclass(frozen=True)
class Support:
    """A version's EKS support tier on one day."""

    version: str
    on: dt.date
    tier: str
    end_standard: dt.date | None
    end_extended: dt.date | None
    #: False when the version is not in :data:`CALENDAR` (its tier is then a guess from its neighbours).
    known: bool = True

    @property
    def days_to_extended(self) -> int | None:
        return None if self.end_standard is None else (self.end_standard - self.on).days

    def describe(self) -> str:
        if not self.known:
            return f"Kubernetes {self.version}: not in the release calendar checked {CHECKED}"
        if self.tier == STANDARD:
            return f"Kubernetes {self.version}: standard support until {self.end_standard}"
        if self.tier == EXTENDED:
            return f"Kubernetes {self.version}: extended support since {self.end_standard}, until {self.end_extended}"
        return f"Kubernetes {self.version}: out of support since {self.end_extended}"


def support(version: str, on: dt.date) -> Support:
    """The tier of ``version`` on the day ``on`` (UTC)."""
    dates = CALENDAR.get(version)
    if dates is None:
        newest = max(CALENDAR, key=_key)
        tier = STANDARD if _key(version) > _key(newest) else ENDED
        return Support(version, on, tier, None, None, known=False)
    end_standard, end_extended = dates
    tier = STANDARD if on < end_standard else EXTENDED if on < end_extended else ENDED
    return Support(version, on, tier, end_standard, end_extended)


def recommended(on: dt.date) -> str:
    """The newest version of the calendar in standard support on ``on`` for more than :data:`WARN_DAYS` days."""
    ok = [v for v, (end, _) in CALENDAR.items() if (end - on).days > WARN_DAYS]
    return max(ok or CALENDAR, key=_key)


def warning(version: str, on: dt.date, *, standard_usd: float, extended_usd: float) -> str | None:
    """The plan's warning when ``version`` is in (or within :data:`WARN_DAYS` days of) extended support, or out
    of support, or not in the calendar; None when it is in standard support for longer."""
    s = support(version, on)
    fix = f'Fix: set `k8s_version: "{recommended(on)}"` under aws: in env.yaml (or -p k8s_version {recommended(on)})'
    field = f"aws.k8s_version = {version!r}"
    if not s.known:
        if s.tier == STANDARD:
            return (
                f"{field} is newer than the EKS release calendar this tool carries ({SOURCE}, checked {CHECKED}); "
                f"priced as standard support (${standard_usd:.2f}/h). Check: aws eks describe-cluster-versions"
            )
        return f"{field} is not an EKS version in the release calendar ({SOURCE}, checked {CHECKED}). {fix}"
    if s.tier == ENDED:
        return f"{field} left EKS extended support on {s.end_extended}: EKS creates no cluster of it. {fix}"
    if s.tier == EXTENDED:
        return (
            f"{field} is in EKS extended support since {s.end_standard} (until {s.end_extended}): the control plane "
            f"costs ${extended_usd:.2f}/h instead of ${standard_usd:.2f}/h. {fix}"
        )
    if s.days_to_extended is not None and s.days_to_extended <= WARN_DAYS:
        return (
            f"{field} leaves EKS standard support on {s.end_standard} (in {s.days_to_extended} days): from then the "
            f"control plane costs ${extended_usd:.2f}/h instead of ${standard_usd:.2f}/h. {fix}"
        )
    return None
