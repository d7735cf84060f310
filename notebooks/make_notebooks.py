"""Writes the tutorial notebooks' sources (cells without outputs).

The notebooks are committed *with* outputs (nbval checks them); this script is how their cells are kept
short and consistent. After editing it: ``python notebooks/make_notebooks.py`` then
``raytrain-tutorial run --force`` and copy the executed notebooks back (``--refresh`` does both).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

PARAMS = """# Parameters (papermill -p NAME VALUE, or raytrain-tutorial run -p NAME VALUE).
# None = the value from env.yaml. Any env.yaml setting can be passed by its flat name (steps, gpu_node_count...).
target = None
run_name = None
env_file = None
override_files = None
assume_yes = False  # billable/destructive actions on aws need an explicit yes"""

SETUP = """import raytrain_helpers as rt

cfg = rt.settings_from(globals())
rt.describe(cfg)"""


def nb(title: str, intro: str, extra_params: str, cells: list) -> nbformat.NotebookNode:
    params = PARAMS + ("\n" + extra_params if extra_params else "")
    out = new_notebook(
        cells=[
            new_markdown_cell(f"# {title}\n\n{intro}"),
            new_code_cell(params, metadata={"tags": ["parameters"]}),
            new_code_cell(SETUP),
        ]
    )
    for kind, text in cells:
        out.cells.append(new_markdown_cell(text) if kind == "md" else new_code_cell(text))
    out.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    out.metadata["language_info"] = {"name": "python"}
    return out


NOTEBOOKS = {
    "01_capacity": nb(
        "01 · Capacity: is there room for the job, and does the model fit?",
        "Before anything is created, check that the hardware exists and the model fits.\n\n"
        "* **local**: the CPUs, memory and GPUs of this machine against the local cluster's shape.\n"
        "* **aws** (the reference sample's `find_gpu_capacity.sh`): AZs offering `GPU_NODE_TYPE`, the type's "
        "GPU/EFA facts, the On-Demand vCPU quota left, Spot placement scores as a signal, an optional "
        "capacity-reservation probe (created and cancelled at once, only with `assume_yes`), and the "
        "recommended placement every later notebook uses.\n\n"
        "Both end with the **FSDP memory plan**: parameters, gradients and AdamW state sharded over the "
        "world size.",
        "probe = False  # aws: create-and-cancel a capacity reservation per candidate AZ\n"
        "regions = None  # aws: list of regions to search",
        [
            (
                "code",
                "cap = rt.steps.capacity.check(cfg, probe=probe, assume_yes=assume_yes, regions=regions)\ncap.show()",
            ),
            (
                "md",
                "## The seeds' figure\n\nQwen2.5-1.5B in bf16 keeps about **12 GB** of parameters, gradients and "
                "AdamW state; sharded eight ways (2 × g6.12xlarge, 4 L4 each) that is about **1.5 GB per GPU**. "
                "This tutorial's job keeps fp32 master weights (bf16 compute), so its sharded state is twice "
                "that; activations and logits come on top.",
            ),
            ("code", 'rt.table(rt.steps.capacity.seed_plan().rows(), ["Qwen2.5-1.5B over 8 x L4", "value"])'),
            ("code", 'assert cap.ok, "capacity check failed: see the problems above"'),
        ],
    ),
    "02_cluster": nb(
        "02 · The cluster",
        "* **local**: a real Ray cluster on this machine: a head raylet that takes no training work "
        '(`--num-cpus 0 --num-gpus 0`, like the head pod\'s `num-gpus: "0"`) and worker raylets standing in '
        "for the GPU nodes, each with its own temp dir, its share of the GPUs and a `train_slot` resource. "
        "Everything listens on 127.0.0.1. Re-running reuses a running cluster of the same shape.\n"
        "* **aws** (`deploy_cluster.sh`, `deploy_node_group.sh`): an eksctl `ClusterConfig` rendered from "
        'env.yaml, then the EFA GPU node group in exactly one AZ. `action="plan"` shows the rendered config '
        "and the actions and creates nothing.",
        "action = None  # up | status | plan | down (default: up on local, plan on aws unless assume_yes)",
        [
            (
                "code",
                "# NBVAL_IGNORE_OUTPUT\n# progress while the cluster starts (timings differ from run to run)\n"
                "cluster = rt.steps.cluster.step(cfg, action, assume_yes=assume_yes)",
            ),
            ("code", "cluster.show()"),
            ("code", 'assert cluster.ok or cluster.action in ("plan", "down", "stopped"), "the cluster is not up"'),
        ],
    ),
    "03_plugins": nb(
        "03 · Devices and device plugins",
        "Ray Train can only place a worker where a device is *allocatable*.\n\n"
        "* **local**: the devices and collective backend each worker node offers (gloo on CPU, NCCL on GPUs).\n"
        "* **aws** (`install_gpu_plugins.sh`): the NVIDIA and EFA device plugins at pinned versions, then a "
        "wait until `nvidia.com/gpu` = GPUS_PER_NODE and `vpc.amazonaws.com/efa` ≥ 1 are allocatable on every "
        "GPU node — a healthy Helm release is not evidence.",
        "",
        [
            ("code", "devices = rt.steps.plugins.step(cfg, assume_yes=assume_yes)\ndevices.show()"),
            (
                "code",
                'assert devices.ok, "devices are not allocatable on every worker node:\\n" + "\\n".join('
                "devices.diagnosis)",
            ),
        ],
    ),
    "04_kuberay": nb(
        "04 · KubeRay and the RayCluster",
        "The whole cluster layout is one `RayCluster` manifest rendered from env.yaml: the head on the CPU "
        'system node with `num-gpus: "0"`, one worker pod per GPU node taking all its GPUs and its EFA '
        "interface, the transport set by four environment variables.\n\n"
        "* **local**: the manifest is rendered and shown; the local cluster of 02 stands in for it "
        "(the table maps each part to its stand-in).\n"
        "* **aws** (`install_kuberay.sh`): the operator pinned to KUBERAY_VERSION, then the RayCluster by "
        "server-side apply, and a wait for the head Ready and every worker Running.",
        "",
        [
            ("code", "kr = rt.steps.kuberay.step(cfg, assume_yes=assume_yes)\nkr.show()"),
            ("code", 'assert kr.ok, "the RayCluster is not ready:\\n" + "\\n".join(kr.problems + kr.diagnosis)'),
        ],
    ),
    "05_train": nb(
        "05 · Train: the FSDP job through the Ray Jobs API",
        "One function runs on every worker: it builds Qwen2 from the preset (random weights, nothing is "
        "downloaded), shards it with FSDP2 (`fully_shard` per decoder layer, then the root), and trains on "
        "seeded synthetic tokens with AdamW, checkpointing with `torch.distributed.checkpoint`.\n\n"
        "It is submitted with Ray's `JobSubmissionClient` — to the head on 127.0.0.1 locally, through a "
        "Kubernetes port-forward on aws — with the code in `runtime_env.working_dir` and NCCL/EFA variables "
        "in `runtime_env.env_vars`; no image is built. Re-running with the same `run_name` resumes from the "
        "latest checkpoint; a job still running is followed, not submitted twice.",
        "steps = None  # training steps (default: env.yaml)",
        [
            (
                "code",
                "# NBVAL_IGNORE_OUTPUT\n# the job's own log, streamed back (timings differ from run to run)\n"
                "run = rt.steps.train.submit(cfg, steps=steps)",
            ),
            ("code", "run.show()"),
            ("code", "# NBVAL_IGNORE_OUTPUT\nrt.steps.train.plot_loss(run);"),
            ("code", "assert run.ok, f\"the job did not succeed: {run.status} {run.result.get('error')}\""),
        ],
    ),
    "06_verify": nb(
        "06 · Verify: success is a list of checked criteria",
        "A finished job is not proof of a healthy run: with a misconfigured EFA stack NCCL silently falls "
        "back to TCP sockets and the job still succeeds, several times slower. Each criterion below is "
        "checked from evidence — the job's record, every rank's summary, the placement of ranks on nodes, "
        "the checkpoint reloaded in this process, and the NCCL transport of every rank pair read from the "
        "workers' own logs. Rows that do not apply to the target say so instead of passing.",
        "",
        [
            ("code", "v = rt.steps.verify.run(cfg)\nv.show()"),
            ("code", 'rt.table(v.placement, ["rank", "node", "kind"], title="rank placement")'),
            (
                "code",
                "# NBVAL_IGNORE_OUTPUT\nif v.audit is not None:\n    rt.nccl.plot_matrix(v.audit);\n"
                'else:\n    print("no NCCL transport to plot (CPU run, gloo)")',
            ),
            ("code", "v.raise_if_failed()  # headless runs fail here if any criterion failed"),
        ],
    ),
    "07_benchmark": nb(
        "07 · Benchmark: the same job, only the transport changed",
        "The job runs twice, changing nothing but the transport environment: on local GPUs P2P/NVLink vs "
        "`NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1`; on aws EFA vs `NCCL_NET=Socket`. Warm-up steps are "
        "discarded. Before comparing, the audit must confirm that each run used the transport it was meant "
        "to — otherwise no speedup is reported. On CPU (gloo) there is no NCCL transport to compare: the "
        "baseline is measured once.",
        "",
        [
            (
                "code",
                "# NBVAL_IGNORE_OUTPUT\nbench = rt.steps.benchmark.run(cfg)\n"
                'rt.table([(b.label, b.job.status, f"{b.steps_per_s:.2f}", f"{b.tokens_per_s_per_gpu:,.0f}") '
                'for b in bench],\n         ["variant", "job", "steps/s", "tokens/s per worker"])',
            ),
            ("code", "cmp = rt.steps.benchmark.compare(cfg, bench)\ncmp.show()"),
            ("code", "# NBVAL_IGNORE_OUTPUT\nrt.steps.benchmark.plot(bench);"),
            ("code", 'assert all(b.job.ok for b in bench), "a benchmark job failed"'),
        ],
    ),
    "08_teardown": nb(
        "08 · Teardown",
        "Everything is removed in reverse order and checked by listing what is left.\n\n"
        "* **local**: the Ray cluster's processes are stopped.\n"
        "* **aws**: the RayCluster, the KubeRay operator, the device plugins, the GPU node group, then the "
        "cluster — only with `assume_yes=True` (papermill runs never prompt).",
        "",
        [
            ("code", "gone = rt.steps.teardown.run(cfg, assume_yes=assume_yes)\ngone.show()"),
            ("code", 'assert gone.ok, getattr(gone, "refused", "") or "something is left: see above"'),
        ],
    ),
}


def write_sources() -> list[Path]:
    paths = []
    for name, notebook in NOTEBOOKS.items():
        path = HERE / f"{name}.ipynb"
        nbformat.validate(notebook)
        nbformat.write(notebook, path)
        paths.append(path)
        print(f"wrote {path.relative_to(HERE.parent)}")
    return paths


def refresh(paths: list[Path]) -> None:
    """Execute the notebooks in order, in place, exactly as nbval will (no injected parameters),
    with a throw-away runs/ directory, then drop papermill's per-cell timing metadata."""
    import os
    import tempfile

    import papermill as pm

    with tempfile.TemporaryDirectory(prefix="raytrain-refresh-") as runs:
        os.environ["RAYTRAIN_RUNS_DIR"] = runs
        for path in paths:
            print(f"executing {path.name}", flush=True)
            pm.execute_notebook(str(path), str(path), cwd=str(HERE), kernel_name="python3", progress_bar=False)
            notebook = nbformat.read(path, as_version=4)
            notebook.metadata.pop("papermill", None)
            for cell in notebook.cells:
                cell.metadata.pop("papermill", None)
                cell.metadata.pop("execution", None)
            nbformat.write(notebook, path)


def main(argv: list[str]) -> int:
    paths = write_sources()
    if "--refresh" in argv:
        refresh(paths)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
