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

#: A driver on the session's cluster: the learnable train dataset and held-out rows for one worker at seq_len 2048
#: (the GPU shape), counted row by row; then the learnable and random train datasets for two workers, split as Ray
#: Train splits them and read to the end, and the Ray tasks (not actor calls) this driver's job ran.
DRIVER = textwrap.dedent(
    """
    import json, threading, ray
    from ray.util.state import list_tasks
    from raytrain_helpers.worker import data
    from tests.helpers import job_cfg
    ray.init(log_to_driver=False)
    cfg = job_cfg(data="learnable", seq_len=2048, batch_size=22, seed=0, steps=1, num_workers=1)
    ds = data.build_datasets(cfg, None, data.BYTE_VOCAB)
    counts = {name: d.count() for name, d in ds.items()}
    print("COUNTS " + json.dumps(dict(counts, eval=len(data.eval_rows(cfg, None, data.BYTE_VOCAB)["input_ids"]))))
    batches = {}
    for source in ("learnable", "random"):
        cfg = job_cfg(data=source, seq_len=128, batch_size=2, seed=0, steps=8, num_workers=2)
        shards = data.build_datasets(cfg, None, data.BYTE_VOCAB)["train"].streaming_split(2, equal=True)
        def read(rank, source=source, shards=shards):
            batches[f"{source}-{rank}"] = sum(1 for _ in shards[rank].iter_torch_batches(batch_size=2))
        readers = [threading.Thread(target=read, args=(rank,)) for rank in range(2)]
        [t.start() for t in readers]
        [t.join() for t in readers]
    job = ray.get_runtime_context().get_job_id()
    mine = [("job_id", "=", job), ("type", "=", "NORMAL_TASK")]
    tasks = sorted({t.name for t in list_tasks(filters=mine, limit=10000)})
    print("SPLIT " + json.dumps(dict(batches=batches, tasks=tasks)))
    """
)


def _tokens(split: str) -> int:
    """Byte tokens of one split of the learnable corpus, each row (prompt and completion) followed by EOS."""
    rows = data.learnable_rows(0)
    return sum(
        len(r["prompt"] + r["completion"]) + 1
        for r in rows
        if data.is_eval_row("prompt_completion", r) == (split == "eval")
    )


@pytest.fixture(scope="module")
def learnable_driver(local_settings, local_cluster) -> dict:
    """What :data:`DRIVER` printed, by its line's first word."""
    env = dict(os.environ, RAY_ADDRESS=f"127.0.0.1:{local_settings.local.gcs_port}")
    r = subprocess.run([sys.executable, "-c", DRIVER], env=env, capture_output=True, text=True, timeout=300)
    out = {
        x.split(" ", 1)[0]: json.loads(x.split(" ", 1)[1])
        for x in r.stdout.splitlines()
        if x[:6] in ("COUNTS", "SPLIT ")
    }
    assert set(out) == {"COUNTS", "SPLIT"}, r.stdout[-2000:] + r.stderr[-3000:]
    return out


def test_long_rows_are_packed_across_whole_blocks(learnable_driver):
    """At seq_len 2048 the held-out split still yields rows, and packing loses less than one row per block: rows
    are cut from a whole block's texts, not from each batch of a few hundred lines (whose held-out part is shorter
    than one row)."""
    counts = learnable_driver["COUNTS"]
    blocks = data.LEARNABLE_BLOCKS
    for split in ("train", "eval"):
        ideal = _tokens(split) // 2048
        assert counts[split] >= 1, counts
        assert ideal - blocks <= counts[split] <= ideal, (split, counts, ideal)


def test_the_driver_made_rows_are_split_without_a_task(learnable_driver):
    """The learnable corpus and random ids are rows the driver made: split over two workers, each worker reads its
    equal share and no Ray task runs for them (no packing, conversion or block slicing: each task on a small machine
    starts a Python process); what runs are calls to the actors of Ray Train's split and Ray Data's own."""
    split = learnable_driver["SPLIT"]
    b = split["batches"]
    assert b["learnable-0"] == b["learnable-1"] > 600 and b["random-0"] == b["random-1"] == 8, b
    assert split["tasks"] == [], split["tasks"]


#: A driver on the session's cluster reading ``train.data`` from S3 (moto's server): the Ray Data read tasks run in
#: the cluster's worker processes, which get the endpoint and credentials through the runtime_env, as pods get
#: theirs from their ServiceAccount on aws.
S3_DRIVER = textwrap.dedent(
    """
    import json, os, sys, ray
    from raytrain_helpers.worker import data
    from tests.helpers import job_cfg
    keys = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION")
    ray.init(log_to_driver=False, runtime_env={"env_vars": {k: os.environ[k] for k in keys if k in os.environ}})
    cfg = job_cfg(data=sys.argv[1], seq_len=16, batch_size=2, seed=0, steps=1, num_workers=1)
    ds = data.build_datasets(cfg, None, data.BYTE_VOCAB)
    rows = {name: [r["input_ids"].tolist() for r in d.take_all()] for name, d in ds.items()}
    rows["eval"] = data.eval_rows(cfg, None, data.BYTE_VOCAB)["input_ids"].tolist()
    print("ROWS " + json.dumps(rows))
    """
)


def test_text_is_read_from_s3_and_packed(local_settings, local_cluster):
    """``train.data: s3://bucket/prefix/`` (a folder of .jsonl files, the aws target's data source) read by Ray Data
    on the cluster from moto's S3: every text reaches the packed rows of its split, in the model's byte tokens."""
    import boto3

    from tests.fakes.aws.moto_env import moto_server

    lines = data.learnable_lines(0, n=600)
    with moto_server() as srv:
        s3 = boto3.client("s3", region_name="us-west-2")
        s3.create_bucket(Bucket="rt-data", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        for i, part in enumerate((lines[:300], lines[300:])):
            body = "".join(json.dumps({"text": t, "id": n}) + "\n" for n, t in enumerate(part))
            s3.put_object(Bucket="rt-data", Key=f"corpus/part-{i}.jsonl", Body=body.encode())
        env = dict(os.environ, **srv.env, RAY_ADDRESS=f"127.0.0.1:{local_settings.local.gcs_port}")
        r = subprocess.run(
            [sys.executable, "-c", S3_DRIVER, "s3://rt-data/corpus/"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    line = next((x for x in r.stdout.splitlines() if x.startswith("ROWS ")), None)
    assert line, r.stdout[-2000:] + r.stderr[-3000:]
    rows = json.loads(line.removeprefix("ROWS "))
    for split in ("train", "eval"):
        texts = [t for t in lines if data.is_eval(t) == (split == "eval")]
        ideal = sum(len(t.encode()) + 1 for t in texts) // 16  # each text and its EOS, 16 per row, 2 files
        if split == "eval":  # the driver takes from the held-out split what the evals read
            ideal = min(ideal, data.EVAL_MAX_BATCHES * 2)
        assert ideal - 2 <= len(rows[split]) <= ideal, (split, len(rows[split]), ideal)
    stream = data.byte_decode(i for row in rows["train"] for i in row if i < 256)
    train = [t for t in lines[:300] if not data.is_eval(t)]
    assert all(t in stream for t in train[:-2]), "texts of the first file missing from the packed train rows"


#: A driver reading prompt/completion rows (your column names, mapped by train.data_columns) from a local parquet
#: file through Ray Data: the packed rows and their labels; then the same file asked for a column it lacks.
PC_DRIVER = textwrap.dedent(
    """
    import json, sys, ray
    from raytrain_helpers.worker import data
    from tests.helpers import job_cfg
    ray.init(log_to_driver=False)
    cfg = job_cfg(data=sys.argv[1], seq_len=32, batch_size=2, seed=0, steps=1, num_workers=1,
                  data_format="prompt_completion", data_columns={"prompt": "question", "completion": "answer"},
                  prompt_template="Q: {prompt}\\nA: ")
    got = data.build_datasets(cfg, None, data.BYTE_VOCAB)["train"].take_all()
    print("ROWS " + json.dumps([[r["input_ids"].tolist(), r["labels"].tolist()] for r in got]))
    try:
        data.build_datasets(cfg.replace(data_columns={"prompt": "query"}), None, data.BYTE_VOCAB)
    except ValueError as e:
        print("ERROR " + json.dumps(str(e)))
    """
)


def test_prompt_completion_rows_are_read_by_ray_data_with_the_prompt_masked(local_settings, local_cluster, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    qs = [f"what is {i} plus {i}?" for i in range(300)]
    ans = [f"{2 * i}" for i in range(300)]
    pq.write_table(pa.table({"question": qs, "answer": ans, "id": list(range(300))}), tmp_path / "qa.parquet")
    env = dict(os.environ, RAY_ADDRESS=f"127.0.0.1:{local_settings.local.gcs_port}")
    r = subprocess.run(
        [sys.executable, "-c", PC_DRIVER, str(tmp_path / "qa.parquet")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = {
        x.split(" ", 1)[0]: json.loads(x.split(" ", 1)[1]) for x in r.stdout.splitlines() if x[:4] in ("ROWS", "ERRO")
    }
    assert set(out) == {"ROWS", "ERROR"}, r.stdout[-2000:] + r.stderr[-3000:]
    trained = "".join(data.byte_decode([i for i, lab in zip(*row, strict=True) if lab != -100]) for row in out["ROWS"])
    context = "".join(data.byte_decode([i for i, lab in zip(*row, strict=True) if lab == -100]) for row in out["ROWS"])
    assert "what is" not in trained and "Q: " not in trained and "what is" in context  # prompts: context only
    kept = [
        a
        for q, a in zip(qs, ans, strict=True)
        if not data.is_eval_row("prompt_completion", {"prompt": q, "completion": a})
    ]
    assert trained.startswith("".join(kept[:3]))  # the completions, in order, each trained on
    assert "no column 'query'" in out["ERROR"] and "train.data_columns" in out["ERROR"] and "Fix:" in out["ERROR"]
