"""06's generation check reading an export from S3 (storage on aws): moto's S3, reached by pyarrow and boto3 through
``AWS_ENDPOINT_URL``; a small random model the test makes itself (nothing downloaded)."""

from __future__ import annotations

import json
import tempfile

import pytest

torch = pytest.importorskip("torch")

from raytrain_helpers.core import config  # noqa: E402
from raytrain_helpers.steps import verify  # noqa: E402
from raytrain_helpers.worker import model as model_mod  # noqa: E402
from tests.helpers import SMALL_MODEL  # noqa: E402

EXPORT = "s3://rt-models/runs/r1/model"


def test_an_s3_export_is_loaded_and_its_local_copy_removed(clean_env, repo_root, tmp_path, monkeypatch):
    """The export is copied from the bucket, loaded, and continues the prompts; the copy is gone afterwards (a
    1.5B model's is about 3 GB, one per call), while the model it loaded still generates."""
    import boto3

    from tests.fakes.aws.moto_env import moto_server

    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the local copy goes
    settings = config.load(repo_root / "env.yaml", environ={}, run_name="r1")
    torch.manual_seed(0)
    model = model_mod.build_random(SMALL_MODEL, "cpu")
    job = dict(
        submission_id="raytrain-r1",
        status="SUCCEEDED",
        result=dict(ok=True, metrics=dict(export_path=EXPORT)),
        config=dict(model=SMALL_MODEL, seed=0, data="learnable", export_path=EXPORT),
    )
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    (tmp_path / "runs" / "r1" / "job.json").write_text(json.dumps(job))
    with moto_server():
        s3 = boto3.client("s3", region_name="us-west-2")
        s3.create_bucket(Bucket="rt-models", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        model_mod.write_hf_folder(model.state_dict(), model.config, EXPORT, model_dir=None, meta={})
        out = verify.generate(settings, show=False)
    assert out["path"] == EXPORT and len(out["rows"]) == 20
    # the export holds the model it was made from: trained and initial weights (the job's seed) continue alike
    assert all(after == before for _, _, before, after in out["rows"]), out["rows"]
    left = [p.name for p in scratch.iterdir() if p.name.startswith("raytrain-model-")]
    assert left == [], "the local copy of the S3 export was left behind"
