"""The job's Ray Data pipeline on the real local cluster: the packed rows the driver hands to Ray Train."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from raytrain_helpers.worker import data

pytestmark = pytest.mark.integration

#: A driver on the session's cluster: the learnable datasets for one worker at seq_len 2048 (the GPU shape),
#: counted row by row.
DRIVER = textwrap.dedent(
    """
    import json, ray
    from raytrain_helpers.worker import data
    ray.init(log_to_driver=False)
    cfg = dict(data="learnable", seq_len=2048, batch_size=22, seed=0, steps=1, num_workers=1)
    ds = data.build_datasets(cfg, None, data.BYTE_VOCAB)
    print("COUNTS " + json.dumps({name: d.count() for name, d in ds.items()}))
    """
)


def _tokens(split: str) -> int:
    """Byte tokens of one split of the learnable corpus, each text followed by EOS."""
    return sum(len(t.encode()) + 1 for t in data.learnable_lines(0) if data.is_eval(t) == (split == "eval"))


def test_long_rows_are_packed_across_whole_blocks(local_settings, local_cluster):
    """At seq_len 2048 the held-out split still yields rows, and packing loses less than one row per block: rows
    are cut from a whole block's texts, not from each batch of a few hundred lines (whose held-out part is shorter
    than one row)."""
    env = dict(os.environ, RAY_ADDRESS=f"127.0.0.1:{local_settings.local.gcs_port}")
    r = subprocess.run([sys.executable, "-c", DRIVER], env=env, capture_output=True, text=True, timeout=300)
    line = next((x for x in r.stdout.splitlines() if x.startswith("COUNTS ")), None)
    assert line, r.stdout[-2000:] + r.stderr[-3000:]
    counts = json.loads(line.removeprefix("COUNTS "))
    blocks = 2  # the learnable corpus is read in two blocks
    for split in ("train", "eval"):
        ideal = _tokens(split) // 2048
        assert counts[split] >= 1, counts
        assert ideal - blocks <= counts[split] <= ideal, (split, counts, ideal)
