"""06 · Verify, section 5: the exported model does the task.

The trained model is loaded the way a user would load it anywhere (``AutoModelForCausalLM.from_pretrained`` on
the exported folder) and continues prompts greedily, beside the weights training started from. On the
``learnable`` data every prompt has one right continuation, so the table has an *expected* column and the
accuracy is a criterion of 06's table (:func:`check_completions`); with a pretrained ``model_id`` and your own
data, the prompts are yours (06's ``prompts`` parameter) and the table shows before and after, unscored.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from typing import Any

from ..clients.rayjobs import JobRun
from ..core import answers
from ..core.criteria import Criteria
from ..core.settings import Settings
from ..core.tables import table
from ..worker import data as worker_data
from ..worker import formats as worker_formats
from ..worker import model as worker_model
from ..worker import sources as worker_sources
from ..worker.job_config import JobConfig
from .train import load_last

#: Held-out prompts the trained model continues in 06 (the learnable language has 26 distinct ones).
HELD_OUT_PROMPTS = 20
#: The trained model must complete at least this fraction of the held-out prompts exactly.
COMPLETION_THRESHOLD = 0.90
#: Prompts continued when the data has no expected answers and the caller gives none.
DEFAULT_PROMPTS = ("The", "Once upon a time", "1, 2, 3,")
COMPLETIONS = "trained model completes held-out prompts"


def completion_ok(correct: int, total: int, threshold: float = COMPLETION_THRESHOLD) -> tuple[bool, str]:
    """(passed, evidence) of the completion criterion: ``correct`` of ``total`` prompts continued exactly, passing
    from ``threshold`` on (and only with at least :data:`HELD_OUT_PROMPTS` prompts)."""
    share = correct / total if total else 0.0
    ok = total >= HELD_OUT_PROMPTS and share >= threshold - 1e-9
    evidence = f"{correct}/{total} exactly right ({share:.0%}), needs >= {threshold:.0%}"
    if total < HELD_OUT_PROMPTS:
        evidence += f" of at least {HELD_OUT_PROMPTS} prompts"
    return ok, evidence


def right(continuation: str, expected: str) -> bool:
    """The held-out metric (:func:`raytrain_helpers.core.answers.matches`): the final answer after ``####`` where
    the expected completion has one (GSM8K), else the continuation starts with the expected letters (the byte
    tokenizer makes exactly them, a pretrained model's tokenizer may make a few more with its last token)."""
    return answers.matches(continuation, expected)


#: New tokens generated for a held-out row of your data (GSM8K's worked solutions are mostly under 200 tokens).
TASK_MAX_NEW_TOKENS = 256


def scored_data(cfg: JobConfig | None, settings: Settings) -> bool:
    """Does the run's data have expected completions 06 can score: the learnable language, or prompt/completion
    data (a file, s3:// or hf://) whose held-out rows carry their completions?"""
    data = (cfg.data if cfg else None) or settings.train.data
    fmt = (cfg.data_format if cfg else None) or settings.train.data_format
    if data == worker_data.LEARNABLE:
        return True
    plain = data == worker_data.RANDOM or str(data).lower().rstrip("/").endswith(".txt")
    return not plain and fmt in ("prompt_completion", "auto")


def check_completions(crit: Criteria, settings: Settings, run: JobRun) -> dict[str, Any] | None:
    """The criterion row: the exported model completes >= 90 % of the held-out prompts exactly (n/a where the data
    has no expected continuation). Returns the generations (for 06's table) or None when none were made."""
    name = f"{COMPLETIONS} (>= {COMPLETION_THRESHOLD:.0%} exactly)"
    cfg = run.job_config
    if not scored_data(cfg, settings):
        crit.add(name, None, na_reason="n/a: the data has no expected continuations (06 shows yours, unscored)")
        return None
    if cfg is not None and cfg.export is False:
        crit.add(name, None, na_reason="n/a: train.export is false, so no trained model was written to load")
        return None
    try:
        out = generate(settings, run=run, show=False)
    except Exception as e:  # noqa: BLE001 - a model that does not load is the finding
        crit.add(name, False, f"could not load the exported model: {type(e).__name__}: {e}")
        return None
    if out["path"] is None:
        crit.add(name, False, "no exported model recorded for this run: run 05_train with train.export: true")
        return out
    scored = [r for r in out["rows"] if r[1] != "-"]
    if not scored:
        crit.add(name, None, na_reason="n/a: no held-out row with a completion was found in the data")
        return out
    correct = sum(right(after, expected) for _, expected, _, after in scored)
    if ((cfg.data if cfg else None) or settings.train.data) != worker_data.LEARNABLE:  # a real task: it must rise
        ok = out["after"] > out["before"]
        evidence = (
            f"{correct}/{len(scored)} exactly right after training ({out['after']:.0%}), {out['before']:.0%} before"
        )
        crit.add(f"{COMPLETIONS} (better than before training)", ok, evidence)
        return out
    ok, evidence = completion_ok(correct, len(scored))
    crit.add(name, ok, evidence + f" (initial weights: {out['before']:.0%})")
    return out


def generate(
    settings: Settings,
    prompts: list[str] | None = None,
    *,
    run_name: str | None = None,
    run: JobRun | None = None,
    max_new_tokens: int = 4,
    show: bool = True,
) -> dict[str, Any]:
    """The exported model, loaded with ``AutoModelForCausalLM.from_pretrained`` in this process, continuing
    ``prompts`` (default: :data:`HELD_OUT_PROMPTS` held-out prompts on ``learnable`` data) greedily beside the
    initial weights; on held-out prompts, the accuracy.

    Returns ``{"rows": [(prompt, expected, before, after)], "before": acc, "after": acc, "path": ...}`` (accuracy
    None when there is no expected answer) and prints a plain-text table."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # plain, stable output (no "Loading weights" bars)
    job = run or load_last(settings, run_name)
    cfg = job.job_config if job else None
    path = (job.metrics.get("export_path") if job else None) or (cfg.export_path if cfg else None)
    if not path:  # nothing to load: say so and leave the failing to the criteria's check
        print("no exported model recorded for this run: run 05_train (with train.export: true) first")
        return {"rows": [], "before": None, "after": None, "path": None}
    with _local_copy(path) as local:
        tok = AutoTokenizer.from_pretrained(local)
        after = AutoModelForCausalLM.from_pretrained(local).eval()
    before = _initial_model(settings, cfg, after).eval()
    before, after = before.to(_device()), after.to(_device())  # a GPU where this machine has one: a task's answers
    pairs = prompt_pairs(settings, cfg, prompts)
    if pairs and pairs[0][1] is not None and len(pairs[0][1]) > max_new_tokens:  # a task's worked answers
        max_new_tokens = max(max_new_tokens, TASK_MAX_NEW_TOKENS)
    rows = []
    for prompt, expected in pairs:
        outs = [_greedy(m, tok, prompt, max_new_tokens) for m in (before, after)]
        rows.append((prompt, expected if expected is not None else "-", *outs))
    scored = [r for r, (_, e) in zip(rows, pairs, strict=True) if e is not None]
    acc = {
        k: (sum(right(r[2 + i], r[1]) for r in scored) / len(scored) if scored else None)
        for i, k in enumerate(("before", "after"))
    }
    if show:
        show_generations(rows, acc, f"{run_name or settings.run_name}/model")
    return dict(rows=rows, path=path, **acc)


@contextlib.contextmanager
def _local_copy(path: str) -> Iterator[str]:
    """A local folder holding the exported model while it loads: the folder itself, or a copy of an S3 export that
    is removed once the model is in memory (a 1.5B model is about 3 GB: one copy per call would pile up)."""
    if not path.startswith("s3://"):
        yield path
        return
    import pyarrow.fs

    with tempfile.TemporaryDirectory(prefix="raytrain-model-") as out:
        pyarrow.fs.copy_files(path, out)
        yield out


def _initial_model(settings: Settings, cfg: JobConfig | None, trained):
    """The weights training started from: the pretrained model_id, or the seeded random init (on CPU)."""
    import torch
    from transformers import AutoModelForCausalLM

    model_id = (cfg.model_id if cfg else None) or settings.train.model_id
    if model_id:
        return AutoModelForCausalLM.from_pretrained(worker_model.resolve_model_dir(model_id, download=False))
    torch.manual_seed(cfg.seed if cfg else settings.train.seed)  # the job's seed, the job's init order
    return worker_model.build_random((cfg.model if cfg else None) or trained.config.to_dict(), "cpu")


def prompt_pairs(settings: Settings, cfg: JobConfig | None, prompts: list[str] | str | None):
    """(prompt, expected or None): the caller's prompts (unscored), else the held-out prompts of ``learnable``
    data, else a few generic ones. A single string is one prompt."""
    if isinstance(prompts, str):
        prompts = [prompts]
    if prompts:
        return [(str(p), None) for p in prompts]
    if ((cfg.data if cfg else None) or settings.train.data) == worker_data.LEARNABLE:
        return worker_data.held_out_prompts(cfg.seed if cfg else settings.train.seed, n=HELD_OUT_PROMPTS)
    pairs = task_pairs(settings, cfg) if scored_data(cfg, settings) else []
    return pairs or [(p, None) for p in DEFAULT_PROMPTS]


def task_pairs(settings: Settings, cfg: JobConfig | None, n: int = HELD_OUT_PROMPTS) -> list[tuple[str, str]]:
    """(prompt as the job rendered it, expected completion) of the first ``n`` held-out rows of prompt/completion
    data: rows the job never trained on (the same hash decides), read here from the same files."""
    t = settings.train
    data = (cfg.data if cfg else None) or t.data
    fmt = (cfg.data_format if cfg else None) or t.data_format
    columns = dict(cfg.data_columns if cfg else t.data_columns)
    template = (cfg.prompt_template if cfg else None) or t.prompt_template
    rows, fmt = worker_sources.held_out_rows(data, fmt, columns, n=n, every=worker_data.EVAL_EVERY_NTH)
    if fmt != worker_formats.PROMPT_COMPLETION:
        return []
    return [(worker_formats.render_prompt(template, r["prompt"]), str(r["completion"])) for r in rows]


def _device():
    """Where 06 generates: this machine's first GPU when it has one (hundreds of tokens per held-out row of a real
    task), else the CPU."""
    import torch

    return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


def _greedy(model, tok, prompt: str, max_new_tokens: int) -> str:
    """Greedy continuation (the same text on every run), through the KV cache; stops at EOS."""
    import torch

    ids = torch.tensor([tok(prompt, add_special_tokens=False)["input_ids"]], device=model.device)
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
        )
    text = tok.decode(out[0, ids.shape[1] :].tolist(), skip_special_tokens=False)
    if tok.eos_token:
        text = text.replace(tok.eos_token, "<eos>")
    return text.replace("\n", "\\n")


def show_generations(rows, acc: dict[str, float | None], path: str) -> None:
    """The before/after table (prompt, expected, initial weights, trained) and, when scored, the accuracy."""
    scored = acc.get("after") is not None
    title = f"greedy continuations of the exported model {path}, beside its initial weights"
    table(rows, ["held-out prompt" if scored else "prompt", "expected", "before training", "after training"], title)
    if scored:
        n = len(rows)
        print(f"exactly right on {n} held-out prompts: {acc['before']:.0%} before training, {acc['after']:.0%} after")
