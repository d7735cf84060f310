"""Synthetic example lines shown to learners: labelled synthetic, and a ``/GDRDMA`` channel line only for an
instance type whose EFA has GPUDirect RDMA (aws-ofi-nccl's platform table: p4d, p4de, p5, p5e, p5en, p6; not G5/G6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raytrain_helpers.nccl import examples

NOTEBOOKS = Path(__file__).resolve().parents[3] / "notebooks" / "src"


@pytest.mark.parametrize(
    "instance_type, gdr",
    [
        ("g6.12xlarge", False),
        ("g6e.48xlarge", False),
        ("g5.48xlarge", False),
        ("p3dn.24xlarge", False),
        ("p4d.24xlarge", True),
        ("p4de.24xlarge", True),
        ("p5.48xlarge", True),
        ("p5e.48xlarge", True),
        ("p5en.48xlarge", True),
        ("p6-b200.48xlarge", True),
    ],
)
def test_gdrdma_only_where_the_instance_type_has_gpudirect_rdma(instance_type, gdr):
    assert examples.gpudirect_rdma(instance_type) is gdr
    text = examples.efa_example(instance_type)
    assert ("GDRDMA" in text) is gdr, text
    assert text.startswith("synthetic example") and instance_type in text
    assert "via NET/Libfabric/0" in text and "via NET/Socket/0" in text


def test_the_default_instance_type_shows_no_gdrdma_line():
    text = examples.efa_example("g6.12xlarge", 4)
    assert not [ln for ln in text.splitlines() if "GDRDMA" in ln]
    assert "found 1 nics" in text and "3[3] -> 4[0]" in text
    assert "found 32 nics" in examples.efa_example("p5.48xlarge", 8)


def test_the_notebooks_type_no_nccl_lines_of_their_own():
    """NCCL lines a learner reads come from the package: captured logs (labelled captured) or synthetic examples
    (labelled synthetic, gated on the instance type), never a hand-typed block in a notebook."""
    for src in sorted(NOTEBOOKS.glob("*.md")):
        typed = [ln for ln in src.read_text().splitlines() if " NCCL INFO " in ln and not ln.lstrip().startswith("#")]
        assert not typed, (src.name, typed)
