"""The `train:` group of env.yaml: model, data, optimizer, checkpoints and the benchmark."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .presets import PRESETS
from .s3_uri import check_storage_uri
from .settings_group import SettingsGroup


class TrainSettings(SettingsGroup):
    """The training job: model, data shape, optimizer, checkpoints and the benchmark."""

    model_preset: str = "tiny"
    """Model shape, built with random weights (no download): `tiny` (CPU, seconds) or `qwen2.5-1.5b` (the
    exact Qwen2.5-1.5B shape, GPUs)."""
    model_id: str = ""
    """Pretrained weights to fine-tune: a local folder written by `save_pretrained` (`config.json` +
    `*.safetensors`, tokenizer files optional) or a model hub id such as `Qwen/Qwen2.5-1.5B` (the workers download
    it into the Hugging Face cache, with `HF_TOKEN` when set; where `HF_HUB_OFFLINE=1` or no hub is reachable, as on
    the local target, its files must already be in the cache). The memory plan and checks use its config.json.
    Empty = random weights in the shape of `model_preset`."""
    data: str = "learnable"
    """Training data, read through Ray Data on the nodes: `learnable` (a small corpus the tutorial writes: runs of
    consecutive letters as prompt/completion rows, which even `tiny` learns in a few steps), a `.jsonl` /
    `.parquet` / `.csv` / `.txt` file or a folder of one kind, `s3://bucket/prefix` (aws), a dataset's files on
    the Hugging Face Hub `hf://datasets/ORG/NAME/PATH` (read by the nodes; `HF_TOKEN` from the cluster's Secret
    when the dataset needs one), or `random` (uniform token ids, for throughput benchmarks only: nothing can be
    learned). The rows' form is `data_format`. Tokenized with the model's tokenizer when `model_id` has one, else
    bytes; packed to `seq_len`; one row in 20 is held out for evaluation."""
    data_format: Literal["auto", "text", "prompt_completion", "chat"] = "auto"
    """The form of the data's rows: `text` (a `text` column, every token trained on), `prompt_completion`
    (`prompt` and `completion` columns: the loss is the completion's alone, the prompt is context), `chat` (a
    `messages` column of `{role, content}` turns, rendered with the model's own chat template: the loss is the
    assistant turns' alone), or `auto` = the first of chat, prompt_completion, text whose columns the data has.
    `learnable` is prompt/completion rows; `random` is ids."""
    data_columns: dict[str, str] = Field(default_factory=dict)
    """Your data's column for each column the form reads, e.g. `{prompt: question, completion: answer}`;
    empty = the columns carry the form's own names (`text`, `prompt`, `completion`, `messages`)."""
    prompt_template: str = "{prompt}"
    """How a prompt is written before its completion (prompt_completion data): `{prompt}` is replaced by the
    prompt column, e.g. `"Question: {prompt}\nAnswer: "`; `{prompt}` alone = the prompt as it is."""
    eval_every: int = 20
    """Held-out eval loss every K steps (0 or more; also before the first step and after the last; 0 = only
    those)."""
    export: bool = True
    """Write the trained model once at the end as a Hugging Face folder (`config.json`, `model.safetensors`,
    tokenizer) to `runs/<run_name>/model`, or `<storage_path>/<run_name>/model` for s3 storage; false = only the
    sharded checkpoints."""
    steps: int = 80
    """Training steps (at least 1)."""
    seq_len: int = 128
    """Tokens per sequence (at least 8), e.g. 128 for `tiny`, 2048 for `qwen2.5-1.5b`."""
    batch_size: int | Literal["auto"] = 2
    """Sequences per worker per step (at least 1), or `auto` = the largest batch the memory plan fits under
    85 % of one GPU's memory (kernels taken into account), chosen before the job is submitted; `auto` on CPU
    workers = 2."""
    learning_rate: float = 0.0
    """AdamW learning rate, between 0 and 1 (exclusive); 0 = auto: 5e-3 for `tiny` from random weights (it learns
    the `learnable` data within the default steps), 1e-4 for the other presets, 2e-5 when fine-tuning `model_id`."""
    num_workers: int = 0
    """Ray Train workers (ranks); 0 = every GPU (or every worker slot on CPU)."""
    checkpoint_every: int = 40
    """Write a sharded checkpoint every K steps and at the end; 0 = only at the end."""
    seed: int = 0
    """Random seed of the initial weights and the synthetic tokens (0 or more)."""
    bench_steps: int = 8
    """Steps of each benchmark run (at least 1, more than `bench_warmup_steps`)."""
    bench_warmup_steps: int = 2
    """Leading benchmark steps left out of the timings (0 or more, fewer than `bench_steps`)."""
    storage_path: str = ""
    """Where the run's checkpoints go; empty = `runs/<run_name>/storage` on local. The aws target needs storage
    every worker pod can reach: `s3://bucket/prefix`."""
    extra_pip: list[str] = Field(default_factory=list)
    """Extra pip packages for the job, installed through the Ray runtime_env only (never a new image); empty =
    none."""
    precision: Literal["auto", "bf16", "fp32"] = "auto"
    """`auto` or `bf16` = bf16 compute with fp32 master weights on GPU (fp32 on CPU); `fp32` = fp32
    everywhere."""
    kernels: Literal["auto", "liger", "none"] = "auto"
    """Fused GPU kernels for the model: `liger` = liger-kernel's RMSNorm, SwiGLU, RoPE and fused linear
    cross-entropy (the loss straight from the hidden states, no logits tensor); `none` = plain PyTorch;
    `auto` = liger on CUDA workers when it can be installed or imported there, none on CPU. liger-kernel is the
    optional extra `gpu`; on aws it reaches the workers through the runtime_env's pip, never a new image."""
    job_timeout_s: int = 0
    """Seconds 05_train lets the job run before stopping it (0 or more); 0 = no limit. A Qwen2.5-1.5B run on aws
    can take hours: set a limit only as a budget guard."""
    max_failures: int = 0
    """Worker-group failures Ray Train recovers from (0 or more; Ray Train's `FailureConfig(max_failures=...)`):
    after a worker process or node dies it restarts every worker from the latest checkpoint. 0 = the first failure
    fails the job."""

    @field_validator("job_timeout_s", "max_failures")
    @classmethod
    def _zero_or_more(cls, v: int) -> int:
        if v < 0:
            raise ValueError("must be 0 or more. Fix: 0 (job_timeout_s: no limit; max_failures: fail at once) or more")
        return v

    @field_validator("model_preset")
    @classmethod
    def _preset(cls, v: str) -> str:
        if v not in PRESETS:
            raise ValueError(f"is not a known preset. Fix: one of {', '.join(PRESETS)}")
        return v

    @field_validator("steps", "bench_steps")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v < 1:
            raise ValueError("must be at least 1. Fix: e.g. 8")
        return v

    @field_validator("batch_size")
    @classmethod
    def _batch(cls, v: int | str) -> int | str:
        if v != "auto" and v < 1:
            raise ValueError("must be at least 1 or `auto`. Fix: e.g. 4, or auto (the memory plan's largest)")
        return v

    @field_validator("seq_len")
    @classmethod
    def _seq(cls, v: int) -> int:
        if v < 8:
            raise ValueError("must be at least 8 tokens. Fix: e.g. 128 (tiny) or 2048 (qwen2.5-1.5b)")
        return v

    @field_validator("learning_rate")
    @classmethod
    def _lr(cls, v: float) -> float:
        if not (0 <= v < 1):
            raise ValueError("must be between 0 and 1 (0 = auto). Fix: e.g. 1e-4, or 0")
        return v

    @field_validator("eval_every")
    @classmethod
    def _eval_every(cls, v: int) -> int:
        if v < 0:
            raise ValueError("must be 0 or more. Fix: e.g. 2 (0 = only before the first step and after the last)")
        return v

    _storage = field_validator("storage_path")(classmethod(lambda cls, v: check_storage_uri(v)))

    @field_validator("data")
    @classmethod
    def _data(cls, v: str) -> str:
        v = (v or "").strip()
        if v in ("learnable", "random") or v.startswith("s3://"):
            return v
        if v.startswith("hf://"):
            if not re.fullmatch(r"hf://datasets/[\w.-]+/[\w.-]+(/.*)?", v):
                raise ValueError(
                    "is not a Hub dataset path. Fix: hf://datasets/ORG/NAME/PATH, e.g. "
                    "hf://datasets/openai/gsm8k/main/train-00000-of-00001.parquet (the dataset's 'Files' tab)"
                )
            return v
        p = Path(v).expanduser()
        kinds = (".jsonl", ".json", ".parquet", ".csv", ".txt")
        if p.is_dir() or (p.is_file() and p.suffix.lower() in kinds):
            return str(p)
        raise ValueError(
            f"is neither `learnable`, `random`, an s3:// prefix, an hf://datasets/ path, nor an existing "
            f"{' / '.join(kinds)} file or folder. Fix: train.data: learnable (the default), or the path of your data"
        )

    @field_validator("prompt_template")
    @classmethod
    def _template(cls, v: str) -> str:
        if "{prompt}" not in v:
            raise ValueError('has no `{prompt}`. Fix: e.g. "Question: {prompt}\\nAnswer: ", or {prompt} alone')
        return v

    @field_validator("data_columns")
    @classmethod
    def _columns(cls, v: dict[str, str]) -> dict[str, str]:
        roles = ("text", "prompt", "completion", "messages")
        bad = [k for k in v if k not in roles]
        if bad:
            raise ValueError(f"names {bad}, which no form reads. Fix: keys among {', '.join(roles)}")
        return v

    @field_validator("num_workers", "checkpoint_every", "bench_warmup_steps", "seed")
    @classmethod
    def _non_negative(cls, v: int) -> int:
        if v < 0:
            raise ValueError("must not be negative (num_workers: 0 means every GPU / worker slot)")
        return v

    @field_validator("model_id")
    @classmethod
    def _model_id(cls, v: str) -> str:
        v = (v or "").strip()
        path = Path(v).expanduser()
        if not v or (path.is_dir() and (path / "config.json").is_file()):
            return v
        if path.is_dir():
            raise ValueError(
                "is a folder without config.json. Fix: a folder written by save_pretrained (config.json + "
                "*.safetensors), or empty for random weights from model_preset"
            )
        if v.startswith(("/", ".", "~")) or not re.fullmatch(r"[\w.-]+/[\w.-]+", v):
            raise ValueError(
                "is neither an existing folder nor a model hub id (`org/name`). Fix: e.g. Qwen/Qwen2.5-1.5B, a folder "
                "with config.json and *.safetensors, or empty for random weights from model_preset"
            )
        return v

    @model_validator(mode="after")
    def _bench(self) -> TrainSettings:
        if self.bench_warmup_steps >= self.bench_steps:
            raise ValueError(
                f"bench_warmup_steps ({self.bench_warmup_steps}) must be smaller than bench_steps "
                f"({self.bench_steps}) so that some timed steps remain"
            )
        return self
