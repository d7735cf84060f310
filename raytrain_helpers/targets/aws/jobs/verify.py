"""Step 06 on aws (notebook 06_verify): the infrastructure rows, the Kubernetes ones (:mod:`.rows`) and the latest
checkpoint's objects listed in S3 by the notebook's own AWS identity.
"""

from __future__ import annotations

import json
from typing import Any

from ....clients import aws as aws_client
from ....core.paths import runs_dir
from ....core.settings import Settings
from ....plan import iam
from . import rows

#: 06's row.
INFRA_CHECKPOINT = "checkpoint in storage"


def infra_criteria(settings: Settings, *, client=None) -> list[tuple[str, bool | None, str]]:
    """06 on aws: the Kubernetes rows of :func:`.rows.infra_criteria`, then :func:`checkpoint_row`."""
    return [*rows.infra_criteria(settings, client=client), checkpoint_row(settings)]


def checkpoint_row(settings: Settings, job: dict[str, Any] | None = None) -> tuple[str, bool | None, str]:
    """The latest checkpoint of the run's last job (05's record), listed in S3: its objects and bytes."""
    if job is None:
        p = runs_dir(settings) / settings.run_name / "job.json"
        job = json.loads(p.read_text()) if p.is_file() else None
    if not job:
        return INFRA_CHECKPOINT, False, "no job recorded for this run: run notebook 05 first"
    result = job.get("result") or {}
    storage_path, ckpt = str(result.get("storage_path") or ""), str(result.get("checkpoint") or "")
    if not storage_path.startswith("s3://"):
        return INFRA_CHECKPOINT, None, f"the job wrote its checkpoints to {storage_path or '?'}, not to S3"
    if not ckpt:
        return INFRA_CHECKPOINT, False, "the job reported no checkpoint"
    bucket, _ = iam.storage_bucket_and_prefix(storage_path)
    key = ckpt.removeprefix("s3://").removeprefix(f"{bucket}/").strip("/") + "/"
    try:
        s3 = aws_client.client(aws_client.session(settings.aws.region), "s3", settings.aws.region)
        objects = aws_client.paginate(s3, "list_objects_v2", "Contents", Bucket=bucket, Prefix=key)
    except Exception as e:  # noqa: BLE001 - any failure to list is the finding
        return INFRA_CHECKPOINT, False, f"s3://{bucket}/{key}: {aws_client.err_code(e)}: {aws_client.err_msg(e)}"
    size = sum(o.get("Size", 0) for o in objects)
    evidence = f"s3://{bucket}/{key}: {len(objects)} object(s), {size} bytes"
    return INFRA_CHECKPOINT, bool(objects), evidence if objects else f"{evidence} (nothing there)"


__all__ = ["INFRA_CHECKPOINT", "checkpoint_row", "infra_criteria"]
