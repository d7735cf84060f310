"""EC2 ``DescribeCapacityBlockOfferings``, which moto 5.2.1 lacks, added to moto's EC2 response class (test-only).

It answers what the real API is documented to answer for a read: the offerings of the region for the asked
instance type and count (``CapacityDurationHours`` is required by botocore's model), an empty list when there
are none. The offerings are seeded by tests in :data:`OFFERINGS` (region -> offerings, API shape); nothing is
ever bought. :func:`install` is called by :func:`tests.fakes.aws.moto_ext.install`.
"""

from __future__ import annotations

from typing import Any

#: region -> offerings (API shape: AvailabilityZone, InstanceType, InstanceCount, StartDate, EndDate, ...)
OFFERINGS: dict[str, list[dict[str, Any]]] = {}


def _describe_capacity_block_offerings(self):  # noqa: ANN001 - moto response method
    from moto.core.responses import ActionResult

    itype = self._get_param("InstanceType")
    count = self._get_int_param("InstanceCount")
    out = [
        o
        for o in OFFERINGS.get(self.region, [])
        if (not itype or o["InstanceType"] == itype) and (count is None or o["InstanceCount"] == count)
    ]
    return ActionResult({"CapacityBlockOfferings": out})


def install() -> None:
    from moto.ec2.responses import EC2Response

    EC2Response.describe_capacity_block_offerings = _describe_capacity_block_offerings
