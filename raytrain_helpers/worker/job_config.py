"""The training job's configuration: one typed object, written as ``job_config.json`` into the job's working_dir.

The notebook side builds it from the settings (``steps/train.py: job_config``); the job's driver on the head reads it
back (:meth:`JobConfig.from_json`) and hands it to every worker, which reads ``cfg.steps``, ``cfg.seq_len``... A
misspelt, missing or ill-typed key is an error naming the key where the config is built or read, before the job is
submitted, not a ``KeyError`` on a worker. Every field is documented by the string literal under it.

The configs are pydantic v2 models (pydantic is in Ray's own requirements, so in every Ray image): strict types
(``int`` is no ``bool``, ``"8"`` is no ``int``), unknown keys forbidden, frozen, each field's docstring its
``description`` (``use_attribute_docstrings``). :class:`TypedConfig` adds the messages that name the key and the
fix, and the JSON round trip of ``job_config.json`` (the transport check's job has a config too:
``worker/transport.py: CheckConfig``).
"""

from __future__ import annotations

import difflib
import json
import types
import typing
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

Self = TypeVar("Self", bound="TypedConfig")


class JobConfigError(ValueError):
    """A job config that is not one: an unknown or missing key, or a value of the wrong type (the message names it)."""


class TypedConfig(BaseModel):
    """What a job's config does, for the models that subclass it (:class:`JobConfig`, the transport check's): refuse
    unknown keys and values of the wrong type naming the key and the fix, write its JSON, read JSON back."""

    # strict: no coercion ("8" is no int, True is no int; an int is a float); frozen: a config is a value (copies
    # with changes: replace()); the docstring under each field is its description
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, use_attribute_docstrings=True)

    #: what the error messages call it
    WHAT: ClassVar[str] = "config"
    #: values for required keys missing from a config recorded by an earlier version (see :meth:`from_dict`)
    RECORDED: ClassVar[dict[str, Any]] = {}

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as e:
            raise JobConfigError(_explain(type(self), e, values)) from None

    def to_dict(self) -> dict[str, Any]:
        """The config as the JSON object ``job_config.json`` holds (one key per field)."""
        return self.model_dump()

    def to_json(self) -> str:
        """``job_config.json``'s text; raises :class:`JobConfigError` naming the first value that would not read
        back as itself (a tuple, a set, a path, a non-str key, NaN), so the job reads exactly this config."""
        d = self.to_dict()
        for k, v in d.items():
            try:
                same = json.loads(json.dumps(v)) == v
            except (TypeError, ValueError):  # not JSON at all
                same = False
            if not same:
                raise JobConfigError(
                    f"{self.WHAT}: {k} = {v!r} does not read back from JSON as itself. Fix: plain JSON values "
                    "(dicts with str keys, lists, str, int, finite float, bool, None)"
                )
        return json.dumps(d, indent=2)

    @classmethod
    def from_dict(cls: type[Self], d: dict[str, Any], *, recorded: bool = False) -> Self:
        """The config of a ``job_config.json`` object. Unknown and missing keys are errors naming them.

        ``recorded``: the config an earlier run recorded, read back for display (``runs/<run>/job.json``, a staged
        ``job_config.json``): keys this version does not know are left out, and keys added since are filled in
        with what such a job ran with (``RECORDED``, then the fields' defaults)."""
        if not isinstance(d, dict):
            raise JobConfigError(f"{cls.WHAT}: expected a JSON object, got {type(d).__name__}")
        if recorded:
            d = {**{k: v for k, v in cls.RECORDED.items() if k not in d}, **d}
            d = {k: v for k, v in d.items() if k in cls.model_fields}
        return cls(**d)

    @classmethod
    def from_json(cls: type[Self], text: str) -> Self:
        """The config of ``job_config.json``'s text (see :meth:`from_dict`)."""
        try:
            d = json.loads(text)
        except ValueError as e:
            raise JobConfigError(f"{cls.WHAT}: not JSON ({e})") from None
        return cls.from_dict(d)

    @classmethod
    def from_record(cls: type[Self], d: dict[str, Any] | None) -> Self | None:
        """The config an earlier run recorded, or None when there is none or it cannot be read (display only)."""
        if not d:
            return None
        try:
            return cls.from_dict(d, recorded=True)
        except JobConfigError:
            return None

    def replace(self: Self, **changes: Any) -> Self:
        """A copy with ``changes``, checked like the constructor (an unknown field or a value of the wrong type is a
        :class:`JobConfigError` naming it)."""
        return type(self)(**{**self.to_dict(), **changes})


class JobConfig(TypedConfig):
    """What the training job runs: the run, the model, the data, the optimizer, checkpoints and where they go."""

    run_name: str
    """The run's name: Ray Train's ``RunConfig(name=...)``, so a job submitted again under the same name resumes
    from the run's latest checkpoint in ``storage_path``."""
    marker: str
    """A short random id of this submission: the end of the job's submission id and of its staged working_dir, and
    printed by every worker (``RAYTRAIN_MARKER``) so its log lines can be told from an earlier job's."""
    model: dict[str, Any]
    """The model's shape as a Hugging Face ``config.json`` dict: the ``model_preset``'s, or ``model_id``'s own."""
    preset: str | None = None
    """``train.model_preset``: the name of the shape in ``model`` (recorded in every checkpoint)."""
    model_id: str | None = None
    """``train.model_id``: pretrained weights to fine-tune (a local folder or a hub id); None = random weights."""
    data: str
    """``train.data``: ``learnable``, ``random``, a file or folder of text / jsonl / parquet, or ``s3://...``."""
    data_format: Literal["auto", "text", "prompt_completion", "chat"] = "auto"
    """``train.data_format``: the form of the rows (``auto``: from the columns the source has); the loss is the
    completion's or the assistant turns' alone in the last two."""
    data_columns: dict[str, str] = {}
    """``train.data_columns``: the source's column for each column a form reads (``{prompt: question}``)."""
    prompt_template: str = "{prompt}"
    """``train.prompt_template``: how a prompt is written before its completion (``{prompt}`` is replaced)."""
    steps: int
    """Optimizer steps of the whole run (a resumed run counts the steps already done)."""
    seq_len: int
    """Tokens per row: the data is packed to rows of this length."""
    batch_size: int
    """Rows per step on each worker (``train.batch_size``, with ``auto`` resolved by the memory plan)."""
    learning_rate: float
    """AdamW's learning rate (``train.learning_rate``, with 0 = auto resolved)."""
    seed: int
    """Seeds the initial weights (the same on every rank), the random data and the learnable corpus."""
    use_gpu: bool | Literal["auto"]
    """Ray Train's ``ScalingConfig(use_gpu=...)``: one GPU per worker and NCCL, or CPU workers and gloo; ``auto``:
    the job's driver decides from the cluster (GPUs in it or not)."""
    storage_path: str
    """Where Ray Train writes the run's checkpoints (``RunConfig(storage_path=...)``): a folder or ``s3://...``."""
    num_workers: int = 0
    """Training workers (ranks); 0 = one per worker slot the cluster offers (one per GPU on GPU nodes)."""
    precision: Literal["auto", "bf16", "fp32"] = "auto"
    """``bf16``: bf16 compute with fp32 master weights on GPUs (``auto`` alike); ``fp32`` everywhere; CPU: fp32."""
    kernels: Literal["auto", "liger", "none"] = "none"
    """Fused Liger kernels: ``liger``, ``none``, or ``auto`` (each worker uses them on a GPU when it can)."""
    planned_kernels: Literal["liger", "none"] | None = None
    """The kernels the memory plan assumed for the workers' GPUs (what ``auto`` is expected to become)."""
    peak_tflops: dict[str, float] | None = None
    """Dense bf16 peak TFLOP/s per GPU model, for each worker's MFU (the workers cannot import the plan's table)."""
    eval_every: int = 0
    """Held-out eval loss every K steps, before the first and after the last step (0 = only those two)."""
    checkpoint_every: int = 0
    """A sharded checkpoint every K steps (0 = only the final one)."""
    final_checkpoint: bool = True
    """Write a checkpoint (carrying the run's summary) after the last step; false in benchmarks."""
    max_failures: int = 0
    """Worker-group failures Ray Train recovers from, restarting from the latest checkpoint (``FailureConfig``)."""
    export: bool = True
    """Write the trained model once at the end as a Hugging Face folder to ``export_path``."""
    export_path: str | None = None
    """Where the trained model is exported (a folder or ``s3://...``); None = no export."""
    warmup_steps: int = 0
    """Steps left out of the throughput figures (the first steps compile and warm the caches)."""
    cpu_threads: int = 1
    """torch threads of a CPU worker (several workers share a machine's cores)."""
    profile_step: int = 0
    """Record this step with ``torch.profiler`` on every rank (its FSDP spans ride in the result); 0 = none."""

    #: what the error messages call it
    WHAT: ClassVar[str] = "job config"
    #: what a job ran with when its recorded config predates a required key (see :meth:`from_dict`): jobs before
    #: ``train.data`` trained on random tokens and exported nothing; the other keys added since then default to
    #: what those jobs did (no evaluation, no kernels)
    RECORDED: ClassVar[dict[str, Any]] = {"data": "random", "export": False}


def uses_gpu(use_gpu: bool | str, cluster_resources: dict[str, float]) -> bool:
    """A config's ``use_gpu`` resolved on the running cluster: ``auto`` = the cluster has GPUs
    (``ray.cluster_resources()``)."""
    if use_gpu == "auto":
        return cluster_resources.get("GPU", 0) > 0
    return bool(use_gpu)


def field_docs(cls: type[TypedConfig] = JobConfig) -> dict[str, str]:
    """``{field: docstring}``: the string literal under each field of the config ``cls``, on one line."""
    return {name: " ".join((f.description or "").split()) for name, f in cls.model_fields.items()}


def _explain(cls: type[TypedConfig], error: ValidationError, values: dict[str, Any]) -> str:
    """pydantic's first error as a line that names the key and the fix."""
    names = list(cls.model_fields)
    first = error.errors()[0]
    key = str(first["loc"][0]) if first["loc"] else ""
    doc = _first_sentence(field_docs(cls).get(key, ""))
    if first["type"] == "extra_forbidden":
        close = difflib.get_close_matches(key, names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"{cls.WHAT}: unknown key {key!r}: {hint}Fix: use the keys of {cls.__name__}: {names}"
    if first["type"] == "missing":
        return f"{cls.WHAT}: missing key {key!r} ({doc}). Fix: set {key}"
    kind = _hint_name(cls.model_fields[key].annotation) if key in cls.model_fields else "?"
    return (
        f"{cls.WHAT}: {key} = {values.get(key)!r} is not of type {kind} ({first['msg']}). Fix: give {key} a value "
        f"of that type ({doc})"
    )


def _hint_name(hint: Any) -> str:
    """A field type as a reader writes it: ``bool | 'auto'``, ``str | None``, ``dict``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType, Literal):
        return " | ".join(repr(a) if origin is Literal else _hint_name(a) for a in typing.get_args(hint))
    if hint is type(None):
        return "None"
    return getattr(origin or hint, "__name__", str(hint))


def _first_sentence(doc: str) -> str:
    return doc.split(". ")[0].rstrip(".")
