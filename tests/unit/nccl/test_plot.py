"""The transport heatmap."""

from __future__ import annotations

import io

import pytest

from raytrain_helpers import nccl
from tests.unit.nccl.fixtures import SOCKET, fixture


def test_plot_matrix_returns_a_figure():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    res = nccl.audit(fixture("synthetic-efa-2x4-healthy.log"))
    fig = nccl.plot_matrix(res)
    assert isinstance(fig, Figure)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"
    ax = fig.axes[0]
    img = ax.get_images()[0].get_array()
    assert img.shape == (8, 8)
    assert len({int(v) for v in img.ravel()}) >= 3  # none, P2P, EFA
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["P2P (NVLink/PCIe)", "EFA (OFI)", "inter-node pair"]
    fig2 = Figure()
    ax2 = fig2.add_subplot(1, 1, 1)
    assert nccl.plot_matrix(nccl.audit(SOCKET.read_text()), ax=ax2) is fig2
    assert nccl.plot_matrix(nccl.audit("")) is not None
    with pytest.raises(ValueError, match="comm="):
        nccl.plot_matrix(res, comm="nope")
