"""The EC2 vCPU quota classes and their Service Quotas codes (raytrain_helpers.targets.aws.placement.quotas)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[5]))

from raytrain_helpers.targets.aws.placement import quotas  # noqa: E402


def test_quota_classes():
    assert quotas.quota_class("g6.12xlarge") == "G and VT"
    assert quotas.quota_class("vt1.3xlarge") == "G and VT"
    assert quotas.quota_class("p5.48xlarge") == "P"
    assert quotas.quota_class("trn1.32xlarge") == "Trn"
    assert quotas.quota_class("inf2.xlarge") == "Inf"
    assert quotas.quota_class("dl1.24xlarge") == "DL"
    assert quotas.quota_class("m7i.xlarge") == "Standard"
    assert quotas.quota_class("i4i.large") == "Standard"
    assert quotas.quota_class("x2idn.large") == "X"
    assert quotas.QUOTA_CLASSES["G and VT"]["od"] == "L-DB2E81BA"
    assert quotas.QUOTA_CLASSES["P"]["od"] == "L-417A185B"
    assert quotas.QUOTA_CLASSES["Standard"]["od"] == "L-1216C47A"
