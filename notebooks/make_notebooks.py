"""Writes the tutorial notebooks' sources (cells without outputs).

The notebooks are committed *with* outputs (nbval checks them); this script is how their cells are kept
consistent. Each notebook is a chapter: what you will learn, time, cost on aws, prerequisites; numbered
sections with prose between short cells; a troubleshooting section quoting the messages the step prints.

    python notebooks/make_notebooks.py                    # write notebooks/NN_*.ipynb (outputs dropped)
    python notebooks/make_notebooks.py --no-execute       # write them to a new temporary folder instead
    python notebooks/make_notebooks.py --out DIR          # write them to DIR
    python notebooks/make_notebooks.py --refresh          # write notebooks/ and execute them in place

``--refresh`` executes every notebook in order on the local target, exactly as nbval will (no injected
parameters), then normalises what JupyterLab and git would otherwise see change (kernelspec, split streams,
papermill's metadata, temporary paths in the outputs nbval ignores).
"""

from __future__ import annotations

import re
import sys
import tempfile
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

#: What `jupyter kernelspec list` shows for ipykernel's default kernel: JupyterLab rewrites the notebook's
#: kernelspec to this on opening, so any other display_name makes every notebook open as modified.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
IGNORE = "# NBVAL_IGNORE_OUTPUT"

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


def md(text: str) -> tuple[str, str]:
    return ("md", textwrap.dedent(text).strip("\n"))


def code(text: str, *, ignore_output: bool = False) -> tuple[str, str]:
    text = textwrap.dedent(text).strip("\n")
    return ("code", f"{IGNORE}\n{text}" if ignore_output else text)


def opening(title: str, learn: list[str], time: str, prereqs: list[str]) -> str:
    """The chapter's first cell: what you will learn, time, cost (printed below), prerequisites."""
    lines = [f"# {title}", "", "**What you will learn**", ""]
    lines += [f"* {item}" for item in learn]
    lines += ["", f"**Time**: {time}", ""]
    lines += [
        "**Cost on aws**: printed by the third code cell below, from the package's price table and your env.yaml "
        "(so it follows the instance types and counts you choose). On the local target nothing is billed.",
        "",
        "**Prerequisites**",
        "",
    ]
    lines += [f"* {item}" for item in prereqs]
    return "\n".join(lines)


def troubleshooting(intro: str, entries: list[tuple[str, str, str]]) -> str:
    """The closing section: each failure the step diagnoses, the message you will see, and the fix."""
    lines = ["## Troubleshooting", "", intro.strip(), ""]
    for failure, message, fix in entries:
        lines += [f"**{failure}**", "", f"You see: {message}", "", f"Fix: {fix}", ""]
    return "\n".join(lines).rstrip()


def notebook(
    stem: str,
    title: str,
    *,
    learn: list[str],
    time: str,
    prereqs: list[str],
    cost_minutes: int,
    creates: bool,
    extra_params: str = "",
    cells: list[tuple[str, str]],
    trouble: str,
) -> nbformat.NotebookNode:
    """One chapter: opening, parameters, setup, cost, the chapter's cells, troubleshooting. Cell ids are
    stable (``<stem>-<index>``) so that regenerating changes nothing that did not change."""
    params = PARAMS + ("\n" + extra_params if extra_params else "")
    flag = "" if creates else ", creates=False"
    all_cells = [
        new_markdown_cell(opening(title, learn, time, prereqs)),
        new_code_cell(params, metadata={"tags": ["parameters"]}),
        new_code_cell(SETUP),
        new_code_cell(f"rt.steps.display.cost_note(cfg, minutes={cost_minutes}{flag})"),
    ]
    for kind, text in [*cells, ("md", trouble)]:
        all_cells.append(new_markdown_cell(text) if kind == "md" else new_code_cell(text))
    for index, cell in enumerate(all_cells):
        cell["id"] = f"{stem.replace('_', '-')}-{index:02d}"
    out = new_notebook(cells=all_cells)
    out.metadata["kernelspec"] = dict(KERNELSPEC)
    out.metadata["language_info"] = {"name": "python"}
    return out


# ==============================================================================================================
# 01 · Capacity
# ==============================================================================================================

CAPACITY = notebook(
    "01_capacity",
    "01 · Capacity: is there room for the job, and does the model fit?",
    learn=[
        "what this tutorial builds on AWS, and how the `local` target stands in for each part on this machine",
        "how to check a region for a GPU instance type, its EFA support and your vCPU quota before creating anything",
        "how FSDP splits parameters, gradients and optimizer state over GPUs, and how to size memory per GPU",
        "how to keep your own settings in an override file instead of editing env.yaml",
    ],
    time="under a minute on the local target; about 5 minutes on aws (read-only API calls).",
    prereqs=[
        "this repository installed by the README's first command (`.venv/` with Ray, PyTorch, Transformers)",
        "comfort with PyTorch: a model, a loss, `backward()`, an optimizer step; no Ray, Kubernetes or EFA needed",
        "for aws: credentials for an account where you may create EKS clusters and EC2 instances "
        "(`aws sts get-caller-identity` answers), and `eksctl` on your PATH for notebook 02",
    ],
    cost_minutes=5,
    creates=False,
    extra_params=(
        "probe = False  # aws: create-and-cancel a capacity reservation per candidate AZ\n"
        "regions = None  # aws: list of regions to search"
    ),
    cells=[
        md(
            """
            ## 1. What you are building

            The tutorial fine-tunes a Qwen2 language model with PyTorch **FSDP** on several GPU machines at once.
            Three pieces of software do the distributing, and each notebook adds one of them:

            * **Ray** is a Python framework that turns a set of machines into one pool of CPUs, GPUs and
              memory. One *head* process keeps the cluster's state (the GCS, Ray's global control store) and
              serves a dashboard and a jobs API; a *raylet* on every machine starts and watches worker processes.
            * **Ray Train** sits on Ray and does for you what `torchrun` does, across machines: it starts one
              training process per GPU (a *worker*, with a *rank*), sets up `torch.distributed`, runs your
              training function in each, gathers the metrics they report and keeps their checkpoints.
            * **KubeRay** runs a Ray cluster on **Kubernetes**: you describe the cluster in one YAML object, a
              `RayCluster`, and the KubeRay *operator* creates the head and worker *pods* (containers) for it.

            On **aws** the Kubernetes cluster is **Amazon EKS**: one CPU *system* node (an `m7i.xlarge`) runs the
            KubeRay operator and the Ray head, and two `g6.12xlarge` GPU nodes (4 NVIDIA L4 each) run one Ray
            worker pod each. Between the two GPU nodes, the gradients and weights FSDP exchanges travel over
            **EFA**, the Elastic Fabric Adapter: a network interface that lets NCCL (NVIDIA's library for
            all-reduce, all-gather and friends) bypass the operating system's TCP stack. Every pod runs the same
            prebuilt image, the Ray Train Deep Learning Container, so nothing is ever built.

            On the **local** target the same notebooks run on a real Ray cluster on this machine: a head raylet
            that takes no training work, and worker raylets that stand in for the GPU nodes (each with its own
            share of the GPUs, or one CPU slot). The training function, the job submission and the checks are
            the same code; only the parts that need AWS (EKS, device plugins, EFA) are replaced by their local
            stand-ins, and each notebook says which.
            """
        ),
        md(
            """
            ## 2. Your settings

            Everything the notebooks do comes from one file, `env.yaml` at the root of the repository: the
            target, the instance types and counts, the versions, the model and training sizes. You rarely edit
            it. Put your own values in an *override file* instead: a few `name: value` lines that win over
            env.yaml (`steps: 20`, `gpu_node_count: 4`, `region: eu-west-1`). Name the file in the parameters
            cell (`override_files = "my-settings.yaml"`) or pass it to the command line (`raytrain-tutorial run
            -f my-settings.yaml`). The form below edits the file named in `override_files`, or
            `my-settings.yaml` beside this notebook when none is named.

            In JupyterLab the cell below shows a form: change a value, press *validate and save*, and the
            settings are checked exactly as every notebook will load them; a bad value is refused next to its
            field with the reason and the fix, and nothing is written. Run headless, the same cell prints the
            settings this run uses and where each value comes from.
            """
        ),
        code("rt.steps.display.settings_form(override_files, cfg)"),
        md(
            """
            Read the `from` column: `env.yaml (...)` is the shared file, a file name is your override file,
            `environment (RAYTRAIN_...)` is a variable of your shell and `parameter (...)` a value passed with
            `-p`. When a value is not what you expect, this column says who set it.
            """
        ),
        md(
            """
            ## 3. Is there room?

            On aws, GPU capacity is the first thing that goes wrong, and the most expensive to discover late:
            an EKS cluster takes 15-20 minutes to create before its GPU node group can fail for lack of quota.
            So this step asks EC2 first, without creating anything: which Availability Zones (AZs) of the region
            offer the GPU type; how many GPUs and EFA interfaces the type has; how many vCPUs your *On-Demand
            quota* for that instance family still allows; how likely Spot capacity is per AZ (a signal only).
            It ranks the AZs and saves the best one; notebook 02 puts the GPU nodes there. All GPU nodes go into
            **one** AZ: EFA traffic does not cross AZs.

            On the local target, the same step compares this machine's CPUs, memory and GPUs with the cluster
            shape in env.yaml.
            """
        ),
        code("cap = rt.steps.capacity.check(cfg, probe=probe, assume_yes=assume_yes, regions=regions)\ncap.show()"),
        md(
            """
            **Reading it.** The first line is the verdict. On aws, the ranked table has one row per AZ: its
            quota column reads *used/limit +need* in vCPUs (two `g6.12xlarge` need 96), and the *verdict*
            column says why an AZ is or is not usable. `ok` rows can host the nodes; the first one is the
            recommendation. Below the table come the instance facts, the hourly cost and the memory plan.
            Locally, check that the worker nodes' slots match the world size you expect.
            """
        ),
        code('rt.steps.display.equivalent_commands("capacity", cfg)'),
        md(
            """
            The commands above are optional: they are what the step does, written out with your values, for
            when you want to check one figure by hand or explain it to a colleague. `--quota-code` is the
            Service Quotas code of the instance family's On-Demand vCPU limit.
            """
        ),
        md(
            """
            ### Throughput and cost, predicted before anything is paid for

            From the model's FLOPs per token (6 × parameters, plus attention), the bytes FSDP all-gathers and
            reduce-scatters each step, the GPU's dense bf16 peak and the bandwidth of the slowest link, the
            planner predicts tokens per second per GPU, the time for the configured steps and, on aws, the cost
            per million tokens, for each transport notebook 07 compares. The efficiency factors were measured
            on H200s (`CALIBRATION` in `raytrain_helpers/plan/perf.py`); 07 puts this prediction beside the
            measurement. CPU workers get no prediction: they train with gloo, and the figures would say nothing
            about a GPU cluster.
            """
        ),
        code("rt.steps.capacity.show_prediction(cfg, cap)"),
        md(
            """
            ## 4. Does the model fit? FSDP in one paragraph

            With plain data parallelism (PyTorch DDP) every GPU holds a full copy of the weights, the gradients
            and the optimizer state. **FSDP** (Fully Sharded Data Parallel) cuts each of those into as many
            *shards* as there are ranks and keeps only its own shard on each GPU. Just before a layer runs,
            the ranks *all-gather* that layer's full weights; right after its backward pass they
            *reduce-scatter* the gradients, so each rank ends up with the summed gradient of its own shard and
            updates only that. Memory per GPU falls roughly with the number of GPUs; the price is network
            traffic on every step, which is why the transport between the machines (EFA or TCP) matters so much.

            The plan below adds up, per GPU: the sharded state (weights, gradients, AdamW's two moments), the
            one layer gathered at a time, the activations and the logits.
            """
        ),
        md(
            """
            ### The reference article's figure

            Qwen2.5-1.5B in bf16 keeps about **12 GB** of parameters, gradients and AdamW state; sharded eight
            ways (2 × g6.12xlarge, 4 L4 each) that is about **1.5 GB per GPU**. This tutorial's job keeps fp32
            master weights (bf16 compute), so its sharded state is twice that; activations and logits come on top.
            """
        ),
        code('rt.table(rt.steps.capacity.seed_plan().rows(), ["Qwen2.5-1.5B over 8 x L4", "value"])'),
        md(
            """
            **Reading it.** Compare *peak per device* with the GPU's memory (an L4 has 24 GB). When a plan says
            `DOES NOT FIT`, its notes name what to shrink first: `batch_size`, then `seq_len`, or more GPUs.
            """
        ),
        md("## 5. Check\n\nHeadless runs stop here when the capacity check failed; the problems above say why."),
        code('assert cap.ok, "capacity check failed: see the problems above"'),
    ],
    trouble=troubleshooting(
        "What this step diagnoses, the message it prints, and what to do about it.",
        [
            (
                "Quota too small (aws)",
                "an AZ row whose verdict reads `SHORT: quota G and VT 40 vCPU free < 96`, the list "
                "`Quota increases to request (then re-run this step):` with one "
                "`aws service-quotas request-service-quota-increase ...` command per region, and the problem "
                "`no AZ has quota (and capacity) for the GPU nodes. Fix: request the quota increases listed, or "
                "try other regions / a smaller gpu_node_count`.",
                "run the printed command (approval can take from minutes to a day), then run this notebook again.",
            ),
            (
                "The GPU type is not offered in your AZ or region (aws)",
                "`aws.gpu_az (GPU_AZ) = 'us-west-2d' does not offer g6.12xlarge. Fix: leave gpu_az empty (this "
                "step picks one) or use one of ...`, or `g6.12xlarge is not offered in any AZ of us-west-2. Fix: "
                "check other regions (--regions / regions=[...]) or choose another gpu_node_type`.",
                "clear `gpu_az` in your override file, or pass `regions=['us-east-1', 'us-west-2']` here to "
                "search several regions and set `region` to the one recommended.",
            ),
            (
                "GPUs per node do not match the type (aws)",
                "`aws.gpus_per_node (GPUS_PER_NODE) = 8 but EC2 says g6.12xlarge has 4 x L4. Fix: set "
                "gpus_per_node: 4`.",
                "set `gpus_per_node` to the type's GPU count (each worker pod claims every GPU of its node).",
            ),
            (
                "The model does not fit (either target)",
                "`planned peak 27.3 GiB per GPU exceeds 90% of 24 GiB. Fix: ...` followed by the plan's notes.",
                "lower `batch_size`, then `seq_len`; or add GPU nodes (`gpu_node_count`), which shrinks every shard.",
            ),
            (
                "Not enough memory on this machine (local)",
                "`about 9.5 GiB of memory needed, 6.1 GiB available. Fix: fewer worker_nodes, a smaller "
                "batch_size/seq_len, or the tiny preset`.",
                "follow the fix: `model_preset: tiny` runs in seconds on two CPU slots.",
            ),
        ],
    ),
)

# ==============================================================================================================
# 02 · The cluster
# ==============================================================================================================

CLUSTER = notebook(
    "02_cluster",
    "02 · The cluster: EKS and its node groups (or the local raylets)",
    learn=[
        "what a Kubernetes cluster on EKS is made of: a control plane, node groups, labels and taints",
        "what the eksctl configuration rendered from env.yaml asks for, line by line",
        "why the GPU nodes sit in one AZ with EFA enabled, and the system node holds no GPU",
        "how the local target starts real Ray processes that stand in for those nodes",
    ],
    time="about a minute on the local target; 20-30 minutes on aws (the EKS control plane, then the GPU nodes).",
    prereqs=[
        "notebook 01 passed (on aws it saved the AZ this step uses)",
        "for aws: `eksctl` on your PATH; `assume_yes=True` as a parameter, because this step creates billed resources",
    ],
    cost_minutes=30,
    creates=True,
    extra_params="action = None  # up | status | plan | down (default: up on local, plan on aws unless assume_yes)",
    cells=[
        md(
            """
            ## 1. What a cluster is made of

            A **Kubernetes** cluster is a *control plane* (the API server you talk to with `kubectl`, and the
            scheduler that decides where things run) plus *nodes*, the machines that run your containers. On
            **EKS** AWS runs the control plane for you; the nodes are EC2 instances in *node groups*, each group
            one instance type, scaled together. Containers run inside *pods*; the scheduler puts a pod on a node
            whose free resources cover the pod's *requests* and whose *labels* match the pod's node selector.

            This tutorial has two node groups. `system` holds one CPU instance for the KubeRay operator and the
            Ray head: they need no GPU, and a GPU node is too expensive to spend on bookkeeping. The GPU group
            holds the training machines, with EFA turned on. Each group carries a `role` label
            (`role=system`, `role=gpu-worker`) that the manifests of later notebooks select on.

            On the **local** target, this step starts Ray directly: a head raylet with
            `--num-cpus 0 --num-gpus 0` (like the head pod's `num-gpus: "0"`) and worker raylets standing in for
            the GPU nodes, each with its own temp folder, its share of the GPUs and a `train_slot` resource that
            only worker nodes offer, so no training worker can ever land on the head. Everything listens on
            127.0.0.1, and running the step again reuses a running cluster of the same shape.
            """
        ),
        md(
            """
            ## 2. The eksctl configuration

            `eksctl` is AWS's command-line tool for EKS: it reads a `ClusterConfig` and creates the VPC, the
            control plane and the node groups with CloudFormation. The package renders two configs from your
            settings. The first is the cluster and its system node group:
            """
        ),
        code('rt.steps.display.show_manifest("eksctl-cluster", cfg)'),
        md(
            """
            **Reading it.** `availabilityZones` lists two AZs, the GPU AZ first (EKS needs subnets in at least
            two). `nat.gateway: Single` gives the private subnets one NAT gateway for pulling images: the nodes
            have no public address. `withOIDC` and the `eks-pod-identity-agent` add-on let pods receive IAM
            roles (the aws target uses that for checkpoint storage on S3). The `system` node group is one
            instance with the `role: system` label.

            The second config is the GPU node group. It is created separately, once the cluster's private subnets
            exist, so it can be pinned to the subnet of exactly one AZ:
            """
        ),
        code('rt.steps.display.show_manifest("eksctl-gpu-nodegroup", cfg)'),
        md(
            """
            **Reading it.** `efaEnabled: true` is the line that matters most: eksctl attaches the EFA interfaces,
            creates a security group that lets EFA traffic flow between the nodes and a cluster placement group
            that keeps them physically close. `minSize = maxSize = desiredCapacity` fixes the group's size
            (a training job wants all its nodes, not an autoscaler's opinion). `volumeSize: 300` leaves room for
            the large DLC image. `--install-nvidia-plugin=false` on the command line leaves the NVIDIA device
            plugin to notebook 03, pinned to the version in env.yaml.
            """
        ),
        md(
            """
            ## 3. Create it, or reuse it

            With `action=None` the step starts the local cluster, or on aws shows the plan (what it would
            create, and what that costs) unless you passed `assume_yes=True`. Every action is safe to repeat:
            it reads what exists and does only what is missing.
            """
        ),
        code(
            "# progress while the cluster starts (timings differ from run to run)\n"
            "cluster = rt.steps.cluster.step(cfg, action, assume_yes=assume_yes)",
            ignore_output=True,
        ),
        code("cluster.show()"),
        md(
            """
            **Reading it.** Locally: one head and one row per worker raylet, each with its resources; `reused`
            means a cluster of the same shape was already running. On aws: the cluster's status (`ACTIVE`), each
            node group's status, size and AZ, and the nodes with their labels. If a node group is
            `CREATE_FAILED`, the step reads the failure's causes from EKS and prints them below the table.
            """
        ),
        code('rt.steps.display.equivalent_commands("cluster", cfg)'),
        md("## 4. Check"),
        code('assert cluster.ok or cluster.action in ("plan", "down", "stopped"), "the cluster is not up"'),
    ],
    trouble=troubleshooting(
        "What this step diagnoses, the message it prints, and what to do about it.",
        [
            (
                "No GPU capacity in the AZ right now (aws)",
                "`GPU node group 'gpu-efa' is CREATE_FAILED (...InsufficientInstanceCapacity...). Fix: see the "
                "causes; then `raytrain-tutorial cluster down --nodegroup-only --yes` and `up` (or pick another AZ "
                "in step 01 when capacity is short)`.",
                "delete only the node group as printed, run notebook 01 again (with `probe=True` it confirms "
                "capacity with a reservation it cancels at once) and create the node group in the new AZ.",
            ),
            (
                "The AZ does not offer the GPU type (aws)",
                "`GPU AZ us-west-2d (...) does not offer g6.12xlarge; AZs that do: us-west-2a, us-west-2b. Fix: set "
                "gpu_az to one of them or re-run step 01`.",
                "clear `gpu_az` (notebook 01 then decides) or set one of the AZs listed.",
            ),
            (
                "An existing node group differs from your settings (aws)",
                "`the existing GPU node group 'gpu-efa' differs from the settings: instance type ...; size ... . "
                "Fix: `raytrain-tutorial cluster down --nodegroup-only --yes`, then `up`; or change the settings "
                "to match`.",
                "the step never resizes or replaces a node group behind your back: choose one of the two fixes.",
            ),
            (
                "A port is taken (local)",
                "`port 6390 (local.gcs_port) is already in use, held by ... Fix: stop that program, or choose a "
                "free port: `-p gcs_port N` or `gcs_port: N` under `local:` in env.yaml`.",
                "another Ray cluster (perhaps another user's) holds the port: choose other ports in your override "
                "file rather than stopping a process you did not start.",
            ),
            (
                "A cluster of another shape is running (local)",
                "`a local Ray cluster is already running on 127.0.0.1:6390 with a different shape (...) than the "
                "settings ask for (...). Fix: `raytrain-tutorial down` then re-run, or change "
                "local.gcs_port/dashboard_port`.",
                "stop it with `raytrain-tutorial down` if it is yours (it only stops what it started).",
            ),
            (
                "A worker node died (local: its raylet was killed or ran out of memory)",
                "in 05 the job FAILED, and 06's rows say `worker node(s) died during the run: <node id> (<host>)`.",
                "run this notebook again: the step starts the dead node again under its own name (`repaired`), "
                "keeping the head, the live nodes and the token; then run 05 again with the same `run_name`, and "
                "the run resumes from its latest checkpoint.",
            ),
        ],
    ),
)

# ==============================================================================================================
# 03 · Devices and device plugins
# ==============================================================================================================

PLUGINS = notebook(
    "03_plugins",
    "03 · Devices: GPUs and EFA only count once Kubernetes can allocate them",
    learn=[
        "what a Kubernetes device plugin is, and the difference between a node's capacity and its allocatable",
        "what the NVIDIA and EFA device plugin DaemonSets look like, and why they need node selectors and tolerations",
        "why a healthy Helm release is not evidence: the step waits until every GPU node advertises its devices",
        "how Ray itself sees GPUs, and what the local target offers instead",
    ],
    time="seconds on the local target; 2-5 minutes on aws.",
    prereqs=["notebook 02 passed: the cluster (or the local raylets) is up"],
    cost_minutes=5,
    creates=True,
    cells=[
        md(
            """
            ## 1. Why a GPU is invisible at first

            Kubernetes schedules CPU and memory out of the box, but it knows nothing about GPUs or EFA
            interfaces. A **device plugin** is a small program, one per node, that finds those devices and
            registers them with the node's kubelet as *extended resources*: `nvidia.com/gpu: 4`,
            `vpc.amazonaws.com/efa: 1`. From then on a pod can request them like CPUs, and the kubelet mounts the
            devices into the pod it places there. Until then, a pod asking for a GPU stays `Pending` forever.

            A plugin runs as a **DaemonSet**: an object that keeps one copy of a pod on every node that matches
            its selector. Its status has `DESIRED` (how many nodes it matches) and `READY`. A DaemonSet whose
            selector or tolerations do not match the GPU nodes has `DESIRED 0`: the install looks healthy and
            nothing happens. That is why this step does not stop at "installed": it waits until each GPU node's
            `status.allocatable` shows `nvidia.com/gpu = GPUS_PER_NODE` and `vpc.amazonaws.com/efa >= 1`.
            """
        ),
        md(
            """
            ## 2. The two DaemonSets

            Both are installed from their Helm charts at the versions pinned in env.yaml. These are the
            equivalent manifests, rendered from your settings (the EFA plugin's long list of instance types is
            abridged):
            """
        ),
        code('rt.steps.display.show_manifest("nvidia-device-plugin", cfg)'),
        code('rt.steps.display.show_manifest("efa-device-plugin", cfg)'),
        md(
            """
            **Reading them.** `nodeSelector: role: gpu-worker` keeps the plugins on the GPU nodes. The
            `tolerations` let them onto nodes *tainted* with `nvidia.com/gpu` or `aws.amazon.com/efa`: a taint
            keeps every pod off a node unless the pod tolerates it, which is how platform teams reserve expensive
            nodes (GPU node pools are commonly tainted; this tutorial's own node group adds no taint, so the
            tolerations are there for clusters that do). The EFA plugin's `nodeAffinity` lists the instance types
            it supports: a type missing from that list gets no EFA plugin at all, which is the classic
            `DESIRED 0`. It mounts `/dev/infiniband` from the host, where the EFA device appears.
            """
        ),
        md(
            """
            ## 3. Install and wait

            On aws the step installs both charts (idempotently: an upgrade to the same version changes nothing),
            then polls the nodes until they advertise their devices; if time runs out, it diagnoses each
            DaemonSet against each GPU node: selector misses, allowlist, untolerated taints, pods that crash.
            Locally there are no device plugins; the step lists what each worker raylet offers to Ray and which
            collective backend its ranks will use (NCCL on GPUs, gloo on CPUs).
            """
        ),
        code("devices = rt.steps.plugins.step(cfg, assume_yes=assume_yes)\ndevices.show()"),
        md(
            """
            **Reading it.** One row per node. On aws, the `GPU` and `EFA` columns are the node's allocatable
            counts: every GPU node must show `GPUS_PER_NODE` and at least one EFA. Locally, `train slots` is how
            many training workers a node can take, and `backend` is what `torch.distributed` will use there.
            """
        ),
        code('rt.steps.display.equivalent_commands("plugins", cfg)'),
        md("## 4. Check"),
        code(
            'assert devices.ok, "devices are not allocatable on every worker node:\\n" + "\\n".join(devices.diagnosis)'
        ),
    ],
    trouble=troubleshooting(
        "What this step diagnoses, the message it prints, and what to do about it.",
        [
            (
                "EFA plugin DESIRED 0 (aws)",
                "`EFA device plugin: DaemonSet aws-efa-k8s-device-plugin-daemonset DESIRED 0 for 2 GPU node(s): "
                "its pods are not meant for these nodes`, then per node the reason, e.g. `-> instance type "
                "g6.12xlarge is not in the EFA plugin's allowlist (v0.5.32). Fix: an EFA-capable type on the list, "
                "or a newer chart`; and the message `GPUs/EFA not allocatable after N s: stopped waiting, a device "
                "plugin's DaemonSet does not admit the GPU nodes (their labels or taints must change)`.",
                "use a type on the allowlist, or a newer `efa_device_plugin_version`; when the reason is a label "
                "(`-> label the GPU nodes role=gpu-worker`), fix the node group's labels in notebook 02.",
            ),
            (
                "Plugin pods Pending on a taint (aws)",
                "`EFA device plugin pod ... on ...: Pending ... -> a taint or selector keeps the plugin pod off its "
                "node`, or for a node `-> add a toleration for it, or remove the taint`.",
                "see which taint the node carries (`kubectl describe node NODE | grep Taints`); remove it or add "
                "a toleration for it.",
            ),
            (
                "NVIDIA plugin crash-looping (aws)",
                "`NVIDIA device plugin pod ... CrashLoopBackOff ... -> the plugin exits when it finds no NVIDIA "
                "driver/GPU: the nodes need the EKS accelerated (NVIDIA) AMI`.",
                "the GPU nodes run an AMI without the NVIDIA driver: recreate the node group with the accelerated "
                "AMI family (`node_ami_family`).",
            ),
            (
                "Plugins Ready but a wrong device count (aws)",
                "`NVIDIA device plugin pods are Ready but node ... advertises nvidia.com/gpu=0, expected 4`.",
                "check `gpus_per_node` against the instance type, and the node's driver (`kubectl describe node`).",
            ),
        ],
    ),
)

# ==============================================================================================================
# 04 · KubeRay and the RayCluster
# ==============================================================================================================

KUBERAY = notebook(
    "04_kuberay",
    "04 · KubeRay: the whole Ray cluster is one manifest",
    learn=[
        "what a Kubernetes operator and a custom resource are, and what the KubeRay operator does with a RayCluster",
        "every important line of the RayCluster rendered from env.yaml: head, worker group, resources, tolerations, "
        "`/dev/shm`, the EFA variables",
        "how this manifest differs from the one the reference article describes, and why",
        "which local process stands in for each part of the manifest",
    ],
    time="seconds on the local target; 5-10 minutes on aws (the image is pulled once per node).",
    prereqs=["notebook 03 passed: GPUs and EFA are allocatable on every GPU node (on aws)"],
    cost_minutes=10,
    creates=True,
    cells=[
        md(
            """
            ## 1. Operators and custom resources

            Kubernetes can be taught new kinds of objects. A **custom resource definition** (CRD) adds a kind,
            here `RayCluster`, to the API; an **operator** is a controller, itself a pod, that watches objects of
            that kind and makes the cluster match them. You apply a `RayCluster` saying "a head like this, and a
            worker group of two pods like that"; the KubeRay operator creates the head pod, a Service in front
            of it (`<name>-head-svc`: the GCS on 6379, the dashboard and jobs API on 8265), and the worker pods,
            each running `ray start` with the flags you gave in `rayStartParams`. Delete a pod and the operator
            creates it again; delete the RayCluster and all of it goes.
            """
        ),
        md("## 2. The RayCluster, rendered from your settings"),
        code('rt.steps.display.show_manifest("raycluster", cfg)'),
        md(
            """
            **Reading it, from the top.**

            * `rayVersion` is the Ray version inside the image; the operator and your client must agree with it.
              `enableInTreeAutoscaling: false` and `replicas = minReplicas = maxReplicas`: a fixed-size cluster.
            * **The head** (`headGroupSpec`) runs on the system node (`nodeSelector: role: system`), behind a
              `ClusterIP` Service (reachable only from inside the cluster; notebook 05 reaches it through a
              port-forward). `num-gpus: "0"` and `num-cpus: "0"` tell Ray to schedule no work at all on the head.
            * **The workers** (`workerGroupSpecs`): one pod per GPU node, requesting *all* the node's GPUs
              (`nvidia.com/gpu`) and its EFA interface (`vpc.amazonaws.com/efa`), with CPU and memory computed
              from the instance type minus what Kubernetes and its daemons reserve. Requests equal limits, which
              gives the pods Kubernetes' *Guaranteed* quality of service: no surprise throttling or eviction.
            * `rayStartParams.resources` gives each worker node `train_slot` = its GPU count: training workers
              ask for one slot each, so they can only land on GPU workers.
            * `volumes`: `/tmp/ray` holds Ray's logs (an `emptyDir`, erased with the pod); `/dev/shm` is a
              **memory-backed** `emptyDir`.
            * `lifecycle.preStop` runs `ray stop`, so a pod leaves the Ray cluster cleanly when it is deleted.
            """
        ),
        md(
            """
            ### What differs from the reference article's manifest, and why

            The article describes its manifest in words: a head on the CPU system node requesting no GPU, two
            worker pods of four GPUs and one EFA interface each, and four variables setting the transport
            (`FI_PROVIDER=efa`, `NCCL_NET_PLUGIN=ofi`, `NCCL_SOCKET_IFNAME=eth0`, `NCCL_DEBUG=INFO`). This
            manifest keeps all of that and changes four things:

            1. **A head with no GPUs, twice over.** Besides `num-gpus: "0"`, the head container sets
               `NVIDIA_VISIBLE_DEVICES=void`: even if the head were ever scheduled on a GPU node, its container
               would see no GPU, and Ray could not hand one out by mistake. `num-cpus: "0"` also keeps ordinary
               Ray tasks off it: the head stays free for the GCS, the dashboard and the job drivers.
            2. **Tolerations.** The worker pods tolerate the `nvidia.com/gpu` and `aws.amazon.com/efa` taints.
               On a cluster whose GPU nodes are tainted (common, to keep other workloads off them), pods
               without these tolerations stay `Pending` with `had untolerated taint`.
            3. **A memory-backed `/dev/shm`.** A container's `/dev/shm` is 64 MiB by default. NCCL's shared-memory
               transport between GPUs of one node and Ray's object store both live there, and 64 MiB ends in
               bus errors or slow fallbacks. The volume is sized at 40 % of the pod's memory, counted in its limit.
            4. **The EFA variables.** `NCCL_SOCKET_IFNAME` *excludes* interfaces (`^lo,docker0,pod-id-link0`)
               instead of naming `eth0`: with EKS Pod Identity each pod also has a link-local `pod-id-link0`
               interface, and if NCCL picked it for its bootstrap connections the ranks could not reach each
               other. `FI_PROVIDER=efa` (libfabric may use nothing but EFA), `NCCL_NET_PLUGIN=ofi` (load the
               aws-ofi-nccl plugin) and `NCCL_DEBUG=INFO` (print the transport lines notebook 06 audits) are as
               in the article. Any of them can be overridden per run with `nccl.env` in your settings.
            """
        ),
        md(
            """
            ## 3. Apply it and wait

            On aws the step installs the operator (pinned to `KUBERAY_VERSION`), applies the namespace and the
            RayCluster with *server-side apply* (repeatable: applying the same object again changes nothing),
            then waits for the head to be `Ready` and every worker `Running`; if it is not, it explains why, pod
            by pod. Locally it renders the same manifest and maps each part to the process of notebook 02 that
            stands in for it.
            """
        ),
        code("kr = rt.steps.kuberay.step(cfg, assume_yes=assume_yes)\nkr.show()"),
        md(
            """
            **Reading it.** On aws: the RayCluster's state (`ready`) and one row per pod with its phase, the node
            and the AZ it landed on; both workers must be on GPU nodes in the GPU AZ. Locally: the table's
            `found` column confirms that each stand-in exists: the head raylet for the head pod, a worker raylet
            per worker pod, the `train_slot` resource, the GPUs each raylet was given.
            """
        ),
        code('rt.steps.display.equivalent_commands("kuberay", cfg)'),
        md(
            """
            The `RayJob` kind is the declarative alternative to notebook 05: a RayCluster spec plus an entrypoint,
            created for one job and deleted after it. `raytrain-tutorial render` writes one under
            `alternatives/`; this tutorial keeps a long-lived RayCluster so that you can submit, inspect and
            resubmit jobs against the same pods.
            """
        ),
        md("## 4. Check"),
        code('assert kr.ok, "the RayCluster is not ready:\\n" + "\\n".join(kr.problems + kr.diagnosis)'),
    ],
    trouble=troubleshooting(
        "What this step diagnoses, the message it prints, and what to do about it.",
        [
            (
                "Worker pods Pending on a taint (aws)",
                "`worker pod raytrain-gpu-efa-worker-... Pending: 0/3 nodes are available: ... had untolerated "
                "taint ...`, a line per node naming the taint, then `Fix: the nodes carry a taint the pod does not "
                "tolerate: remove it (`kubectl taint nodes NODE KEY-`) or add a toleration to "
                "manifests/_raycluster_spec.j2`.",
                "as printed; keep the tolerations in the template in step with the taints your platform uses.",
            ),
            (
                "Worker pods Pending for GPUs or EFA (aws)",
                "`... Insufficient nvidia.com/gpu ...` and `Fix: the device plugins do not advertise the GPUs/EFA: "
                "run notebook 03 (plugins.step)`.",
                "run notebook 03 again and read its diagnosis.",
            ),
            (
                "Pods Pending on a label (aws)",
                "`... didn't match Pod's node affinity/selector ...` and `Fix: no node has the label the pod "
                "selects (role=system / role=gpu-worker): check the nodegroup labels (notebook 02)`.",
                "the node groups must carry the `role` labels of notebook 02's configs.",
            ),
            (
                "Head never Ready (aws)",
                "`head pod raytrain-head-... is Running but not Ready: ... . Fix: read its log (`kubectl logs -n "
                "ray-train raytrain-head-...`); common causes: RAY_VERSION differs from the image's Ray, the GCS "
                "cannot start (memory), the image could not be pulled`, or after the wait "
                "`RayCluster ray-train/raytrain not ready after N s`.",
                "read the head's log first: a version mismatch names both versions; `ImagePullBackOff` means the "
                "nodes cannot reach ECR Public (NAT gateway).",
            ),
            (
                "A pod killed for memory (aws)",
                "a pod problem such as `container ray-worker terminated: OOMKilled exit 137`, or `container ray-worker "
                "running but not ready (restarts 2, last exit OOMKilled 137)`.",
                "the container used more than its memory limit: lower `batch_size` or `seq_len`, or use a larger "
                "instance type (the pod sizes follow the type).",
            ),
        ],
    ),
)

# ==============================================================================================================
# 05 · Train
# ==============================================================================================================

TRAIN_KEY_LINES = """rt.steps.display.key_lines(
    [
        ("the driver: one TorchTrainer for the whole job", "TorchTrainer("),
        ("how many workers, and what each one asks for", "ScalingConfig("),
        ("FSDP2: shard each decoder layer, then the root", "fully_shard("),
        ("mixed precision: bf16 compute, fp32 master weights and reduction", "MixedPrecisionPolicy("),
        ("this worker's shard of the dataset", "get_dataset_shard("),
        ("metrics (and checkpoints) back to the driver", "ray.train.report("),
        ("a checkpoint made of every rank's files", "Checkpoint.from_directory("),
        ("resume from the latest checkpoint", "ray.train.get_checkpoint("),
    ]
)"""

TRAIN = notebook(
    "05_train",
    "05 · Train: an FSDP job through Ray Train and the Ray Jobs API",
    learn=[
        "Ray Train's model: a driver with a `TorchTrainer`, a `ScalingConfig`, one worker process per GPU, "
        "`ray.train.report` and checkpoints",
        "the training function every worker runs, read from the package itself",
        "where FSDP2 shards the model (per decoder layer), how mixed precision is set, where each worker's data "
        "shard comes from",
        "how a job is submitted with the Ray Jobs API: code in `working_dir`, transport settings in `env_vars`, "
        "no image built",
    ],
    time="about a minute on the local target (the tiny preset); 10-15 minutes on aws for Qwen2.5-1.5B.",
    prereqs=["notebooks 02-04 passed: the cluster is up and the Ray head answers"],
    cost_minutes=15,
    creates=True,
    extra_params="steps = None  # training steps (default: env.yaml)",
    cells=[
        md(
            """
            ## 1. From `torchrun` to Ray Train

            With `torchrun` you start one process per GPU yourself, on every machine, with the right rank and
            the address of rank 0. **Ray Train** does that part for you from a Python object:

            * A **driver** (the job's entrypoint, one process) builds a `TorchTrainer(train_loop_per_worker,
              train_loop_config=..., scaling_config=..., run_config=...)` and calls `fit()`.
            * The **`ScalingConfig`** says how many **workers** to start (one per GPU, `num_workers`), whether
              they use GPUs, and what else each needs: here one `train_slot`, which only worker nodes offer.
            * Ray places the workers on the cluster's nodes, starts one process (an *actor*) for each, sets up
              `torch.distributed` between them (NCCL on GPUs, gloo on CPUs) and calls your function in each,
              with its **rank** available from `ray.train.get_context()`.
            * Inside the function, **`ray.train.report(metrics, checkpoint=...)`** sends metrics back to the
              driver; with a checkpoint, every rank's files are gathered into one checkpoint folder under the
              run's `storage_path` (a local folder here, S3 on aws). When the job starts again with the same run
              name, **`ray.train.get_checkpoint()`** hands the latest one to every worker: that is how a run resumes.
              Call it when there is something to keep, not every step: each worker holds one unread report, and
              the driver's controller collects reports once per health check (every 2 s by default), so a report
              per step makes every step wait for that check. This job prints each step's metrics in its log and
              reports with each checkpoint and at the end.
            * **Ray Data**: when the job reads a dataset, the driver passes it to the trainer, and each worker
              reads only its own part with `ray.train.get_dataset_shard("train")`, streaming batches to its GPU
              (the package's job generates synthetic tokens when no dataset is configured). The held-out rows
              are few and read at every evaluation, so the driver makes them once and puts them in Ray's object
              store (`ray.put`); each rank evaluates its equal share.

            Everything else in the function is ordinary PyTorch.
            """
        ),
        md("## 2. The function every worker runs\n\nShown from the package, so it cannot drift from what runs:"),
        code('rt.steps.display.show_source("raytrain_helpers.worker.train:train_loop_per_worker")'),
        md(
            """
            **Reading it.** Each rank builds (or loads) the model, shards it, resumes from the latest checkpoint
            if Ray Train hands one over, runs its steps, then gathers a summary of every rank and writes the last
            checkpoint. The steps themselves are a plain PyTorch loop: forward, loss, `backward()`,
            `optimizer.step()`; the only Ray calls are the reports.

            The lines that make it distributed are spread over the job's modules. This listing finds them by their
            text, so it follows the code as it changes:
            """
        ),
        code(TRAIN_KEY_LINES),
        md(
            """
            **Reading the key lines.**

            * **Sharding per decoder layer.** `fully_shard(layer)` on each transformer block, then on the root
              model, makes each block one FSDP unit: its weights are all-gathered just before it runs and freed
              right after, so a GPU never holds more than a block or two of full weights. Sharding only the root
              would gather the whole model at once and save little memory.
            * **Mixed precision.** `MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)`
              keeps the sharded master weights in fp32, casts them to bf16 for the forward and backward passes,
              and reduces gradients in fp32 so that summing over many ranks loses nothing. On CPU the job stays
              in fp32.
            * **The data shard.** Each rank reads a different part of the data (its Ray Data shard, or synthetic
              batches seeded by its rank): eight ranks see eight different batches per step, and the gradient
              reduction averages them, as in DDP.
            * **Report and checkpoint.** Every step reports its metrics; every `checkpoint_every` steps (and at
              the end) each rank writes its own shard with `torch.distributed.checkpoint` into a temporary folder
              and passes it as `Checkpoint.from_directory(...)`. No rank ever holds the full model state: the
              checkpoint is as sharded as the training.
            """
        ),
        md(
            """
            ## 3. How the job is submitted

            The driver runs on the Ray cluster, not in this notebook. The step uses Ray's **Jobs API**
            (`JobSubmissionClient`, the same API as `ray job submit`) on the head: on the local target at
            127.0.0.1, on aws through a Kubernetes port-forward to the head pod. The job's code travels as its
            `runtime_env.working_dir` (a copy of this package and a `job_config.json`), and the NCCL/EFA variables
            as `runtime_env.env_vars`; extra pip packages, if any, as `runtime_env.pip`. The image is never
            rebuilt. If a job of the same run is still running, the step follows it instead of submitting twice.
            """
        ),
        code('rt.steps.display.equivalent_commands("train", cfg)'),
        md(
            """
            `MARKER` is the job's own id, which the step generates and prints when it submits. Replace it to
            follow a job by hand.
            """
        ),
        md(
            """
            ## 4. Run it

            In JupyterLab the cell below draws a live view while the job runs: a progress bar, the loss per step
            and the last step's tokens/s. Run headless, it prints one line per step. Either way the job's complete
            log is saved in `runs/<run_name>/job.log`.
            """
        ),
        code(
            "# the job's own log, streamed back (timings differ from run to run)\n"
            "run = rt.steps.train.submit(cfg, steps=steps, progress=rt.steps.display.live_view())",
            ignore_output=True,
        ),
        md(
            """
            **Reading it.** Each `[train] step k/N` line is rank 0's view of one step: the loss averaged over all
            ranks, the step time, tokens per second on that rank and the peak memory. The first step is slow
            (model build, process-group setup, first all-gathers); judge speed from the later ones.
            `checkpoint saved at step k` marks each checkpoint; a second run with the same `run_name` starts with
            `resumed from checkpoint at step k`.
            """
        ),
        code("run.show()"),
        code("rt.steps.display.efficiency(run)"),
        md(
            """
            **Model FLOPs utilisation (MFU)** is the share of the GPU's dense bf16 peak the training really uses:
            (6 × parameters + attention) FLOPs per token × tokens/s ÷ the peak from the GPU's data sheet. FSDP jobs
            on H100s reach about 33-39 %; this job with fused kernels and an automatic batch reaches about 54 % on
            an H200. On CPU workers there is no such peak to compare with.
            """
        ),
        md(
            """
            **Reading it.** `SUCCEEDED` is the job's status in Ray; `steps a->b` says where it started (b > a when
            it resumed); one row per rank with the node it ran on, its tokens/s and its peak memory. Ranks on
            different nodes are what makes this multi-node: notebook 06 checks that, and more.
            """
        ),
        code("rt.steps.train.plot_loss(run);", ignore_output=True),
        md(
            """
            **Reading the loss.** Solid: the training loss per step; dashed: the loss on held-out text the model
            never trains on, every `eval_every` steps. The default data (`data: learnable`) is a small "alphabet
            language" the tutorial generates: runs of consecutive letters such as `klmnopq`, wrapping from z to a.
            A model that guesses uniformly over the tiny preset's 1,024 tokens scores ln 1024 ≈ 6.9; within the
            default 8 steps the tiny model learns which bytes occur at all and the held-out loss falls well below
            that. Learning which letter follows which takes more steps (try `-p steps 32`). With `data: random`
            (uniform random tokens, kept for throughput benchmarks) nothing can be learned and the loss stays near
            6.9. A loss that becomes `nan` or grows steadily is a bug: 06 fails on a non-finite loss, and on a
            held-out loss that did not fall.
            """
        ),
        md("## 5. Check"),
        code("assert run.ok, f\"the job did not succeed: {run.status} {run.result.get('error')}\""),
    ],
    trouble=troubleshooting(
        "What this step diagnoses, the message it prints, and what to do about it.",
        [
            (
                "Out of memory on a GPU (either target)",
                "the job FAILED with `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...` in its "
                "error; on aws a worker pod may instead show `container ray-worker terminated: OOMKilled exit 137` "
                "(host memory).",
                "run notebook 01 with the same settings and read the memory plan; lower `batch_size`, then "
                "`seq_len`, or add GPU nodes. A job that fails after a checkpoint resumes from it when you run this "
                "notebook again with the same `run_name`.",
            ),
            (
                "Workers never start (either target)",
                "the log stops at `Requesting resources: {'train_slot': 1, ...} * 8` and the step times out.",
                "fewer slots exist than workers requested: `num_workers` exceeds the GPUs (or CPU slots) of the "
                "worker nodes, or a worker pod is gone. Set `num_workers: 0` (every slot) or check 03 and 04.",
            ),
            (
                "No checkpoint storage on aws",
                "`train.storage_path is empty but the aws target needs storage every worker pod can reach for "
                "checkpoints. Fix: storage_path: s3://YOUR-BUCKET/raytrain`.",
                "as printed: each worker pod writes its own shard, so the storage must be shared (S3).",
            ),
            (
                "A job of the run is already running (either target)",
                "`a job of run 'tutorial' is already running: following raytrain-tutorial-...`.",
                "nothing to fix: the step attaches to it rather than starting a second job on the same GPUs. Use "
                "another `run_name` for an independent run.",
            ),
        ],
    ),
)

# ==============================================================================================================
# 06 · Verify
# ==============================================================================================================

VERIFY = notebook(
    "06_verify",
    "06 · Verify: success is a list of checked criteria, not exit code 0",
    learn=[
        "why a job that SUCCEEDED can still be a failed run (the silent TCP fallback)",
        "how each criterion is checked from evidence: the job record, every rank's summary, the placement, the "
        "checkpoint, the memory plan",
        "NCCL's transports (P2P, SHM, NET over sockets or EFA) and how to read the lines NCCL prints about them",
        "what the rank-pair transport audit concludes, and from which log lines",
    ],
    time="under a minute on the local target; 1-2 minutes on aws.",
    prereqs=["notebook 05 ran (it records the job in `runs/<run_name>/job.json`)"],
    cost_minutes=5,
    creates=True,
    cells=[
        md(
            """
            ## 1. Why a green job can still be wrong

            If the EFA stack is misconfigured, NCCL does not fail: it quietly uses its built-in TCP sockets
            instead, and the job succeeds several times slower. Other silent failures exist too: all ranks on one
            node, a checkpoint that cannot be read back, a loss that went `nan`. So this notebook checks each
            property separately, from evidence, and says which rows do not apply to the target instead of
            passing them.
            """
        ),
        md("## 2. The criteria"),
        code("v = rt.steps.verify.run(cfg)\nrt.steps.display.criteria_view(v)"),
        md(
            """
            **Reading it.** Every row is `PASS`, `FAIL` or `n/a`, with its evidence. The infrastructure rows
            (allocatable GPUs and EFA, `fi_info -p efa` inside a worker pod) apply on aws only. *Every rank
            reported SUCCESS* counts ranks from their own log lines, not from the driver's word. *Checkpoint
            restorable* loads the sharded checkpoint into one process here: the shards of N ranks must reassemble
            into the full model, all finite. *Measured memory vs the plan* compares what each rank really held
            with notebook 01's plan. The last row is the transport audit (n/a on CPU, where gloo is used).
            *The model learned* compares the mean of the last two held-out evals with the first one: at least 5 %
            lower passes; it is n/a on `data: random`, where there is nothing to learn. *Worker restarts* says
            whether Ray Train restarted the worker group after a failure (`train.max_failures`) and from which
            checkpoint step it resumed. In the NCCL row, the number of ranks the audit found in the logs must equal
            the job's world size: logs of another run cannot pass for this one.
            """
        ),
        md("## 3. Where the ranks ran"),
        code('rt.table(v.placement, ["rank", "node", "kind"], title="rank placement")'),
        md(
            """
            **Reading it.** One row per rank with the Ray node it ran on. Two GPU nodes with four GPUs each should
            give ranks 0-3 on one node and 4-7 on the other, and `HEAD` must never appear.
            """
        ),
        md(
            """
            ## 4. NCCL's transports, and the lines the audit reads

            Between two ranks, NCCL picks a **transport** per connection:

            * **P2P**: GPU to GPU inside a node, over NVLink or PCIe (`via P2P/CUMEM`, `via P2P/IPC`);
            * **SHM**: inside a node through host shared memory, `/dev/shm` (`via SHM`), when P2P is unavailable;
            * **NET**: between nodes, through a network plugin. Without one, NCCL's built-in **Socket** transport
              uses TCP (`via NET/Socket/0`). With the **aws-ofi-nccl** plugin, NCCL talks to **libfabric**, whose
              `efa` provider drives the EFA device (`via NET/Libfabric/0`, with `/GDRDMA` where GPUs and EFA
              exchange data directly).

            With `NCCL_DEBUG=INFO` every rank prints one line per channel and peer. From a healthy EFA run
            (ranks 3 and 4 on different nodes):

            ```
            ip-10-0-1-11:4211:4211 [3] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 1 nics)
            ip-10-0-1-11:4211:4211 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[0] [send] via NET/Libfabric/0/GDRDMA
            ```

            and from the silent fallback (the same pair, over TCP):

            ```
            ip-10-0-1-11:4211:4211 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[0] [send] via NET/Socket/0
            ```

            The line `Using network Socket` alone proves nothing: it names the plugin NCCL loaded, and a healthy
            single-node NVLink run prints it too. The audit therefore reads every rank's channel lines, builds the
            rank-pair by transport matrix, tells intra-node from inter-node pairs by host, and compares each pair
            with the transport expected on this target (`efa` on aws, `p2p` on local GPUs). These are the lines
            it based its verdict on:
            """
        ),
        code("rt.steps.display.show_nccl_lines(v.audit)"),
        md(
            """
            **Reading it.** The first line is the verdict. `[FAIL] fallback` means some pairs between nodes
            rode TCP; `[FAIL] plugin-failure` that the aws-ofi-nccl plugin did not load or libfabric chose another
            provider. Each finding quotes the log lines (`>`) it rests on, so you can find them in the workers'
            logs yourself.
            """
        ),
        code(
            'if v.audit is not None:\n    rt.nccl.plot_matrix(v.audit);\nelse:\n    print("no NCCL transport to plot '
            '(CPU run, gloo)")',
            ignore_output=True,
        ),
        code('rt.steps.display.equivalent_commands("verify", cfg)'),
        md("`WORKER_LOGS` stands for the training workers' log files (on aws, `kubectl logs` of each worker pod)."),
        md(
            """
            ## 5. The model you get

            At the end of the job, rank 0 gathered the shards once and wrote the trained model as an ordinary
            Hugging Face folder, `runs/<run_name>/model` (on aws under the run's S3 prefix): `config.json`,
            `model.safetensors` and the tokenizer. Nothing in it depends on Ray or FSDP. The cell below loads it the
            way you would anywhere, with `AutoModelForCausalLM.from_pretrained`, and continues held-out prompts of
            the training language greedily, beside the same model with its initial weights.
            """
        ),
        code("g = rt.steps.verify.generate(cfg)", ignore_output=True),
        md(
            """
            **Reading it.** Each row is a prompt the model never trained on, what the initial weights continue it
            with, and what the trained model does. After the default 8 CPU steps the model has learned which
            letters occur (the loss fell), not yet which letter follows which, so expect little accuracy; with
            `-p steps 32` the continuations start to come out right. With `model_id` set to a pretrained model and
            your own text as `data`, this is the fine-tuned model you take away.
            """
        ),
        md("## 6. Check"),
        code("v.raise_if_failed()  # headless runs fail here if any criterion failed"),
    ],
    trouble=troubleshooting(
        "What the criteria and the audit diagnose, the message you will see, and what to do about it.",
        [
            (
                "Socket fallback (aws)",
                "the transport row FAILs with `4 inter-node pair(s) ride NET/Socket - TCP sockets instead of the "
                "fabric: the silent fallback`, or with libfabric's TCP provider `... ride NET/Libfabric - "
                "libfabric's tcp provider (TCP), not EFA: the EFA device is not visible to the pod`.",
                "check that the worker pods request `vpc.amazonaws.com/efa` (04's manifest) and that the nodes "
                "advertise it (03); check `FI_PROVIDER=efa` and `NCCL_NET_PLUGIN=ofi` in the pod's environment and "
                "that `nccl.env` does not set `NCCL_NET=Socket`; then run 05 and 06 again.",
            ),
            (
                "The plugin did not load (aws)",
                "`[FAIL] plugin-failure: aws-ofi-nccl did not initialise in 8 of 8 process(es): no 'NET/OFI "
                "Selected provider' or 'Using network Libfabric' line (plugin not loaded; NCCL_NET_PLUGIN / "
                "LD_LIBRARY_PATH?)`.",
                "the image's plugin is found through `NCCL_NET_PLUGIN=ofi`: do not override `LD_LIBRARY_PATH` "
                "in `nccl.env`, and keep the DLC image of env.yaml.",
            ),
            (
                "Intra-node pairs over sockets (local GPUs)",
                "`2 intra-node pair(s) ride NET/Socket although their ranks share a host: P2P/SHM are disabled or "
                "unavailable, see the NCCL_*_DISABLE lines (expected p2p)`.",
                "remove `NCCL_P2P_DISABLE` / `NCCL_SHM_DISABLE` from `nccl.env` (notebook 07 sets them on purpose "
                "for its baseline only).",
            ),
            (
                "No job to verify",
                "the row `job recorded by 05_train` FAILs with `no job.json under .../runs/tutorial: run 05_train "
                "first`.",
                "run notebook 05 with the same `run_name` (and the same `RAYTRAIN_RUNS_DIR`, if you set one).",
            ),
            (
                "Ranks on one node, or on the head",
                "`workers spread over >= 2 worker nodes, none on the head` FAILs with `8 ranks on 1 worker "
                "node(s)` or `ranks [0] on the head`.",
                "a worker pod was missing when the job started (04), or the head offers GPUs: its `num-gpus` must "
                'be "0".',
            ),
        ],
    ),
)

# ==============================================================================================================
# 07 · Benchmark
# ==============================================================================================================

BENCHMARK = notebook(
    "07_benchmark",
    "07 · Benchmark: the same job, only the transport changed",
    learn=[
        "how to run a fair A/B test of a transport: same job, same sizes, warm-up steps discarded",
        "why each run's transport is audited before any speedup is reported",
        "what tokens/s per worker and steps/s mean, and how to read them",
    ],
    time="about 2 minutes on the local target; 15-20 minutes on aws (two jobs).",
    prereqs=["notebooks 02-04 passed (the cluster is up); 05 and 06 passed once, so the job itself is known good"],
    cost_minutes=20,
    creates=True,
    cells=[
        md(
            """
            ## 1. What is compared

            The job of notebook 05 runs twice with `bench_steps` steps, changing nothing but the transport
            environment: on aws EFA against `NCCL_NET=Socket` (plain TCP); on local GPUs P2P/NVLink against
            `NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1`. The first `bench_warmup_steps` steps of each run are left out
            of the timings: they include process-group setup, memory allocation and the first all-gathers. No
            checkpoint is written, so the timings measure training only.

            A speedup is only meaningful if each run really used the transport it was meant to: if the EFA run
            had silently fallen back to TCP, "EFA vs TCP" would compare TCP with TCP. So each run's NCCL log is
            audited first, and the comparison refuses to report a number when an audit fails. On CPU workers
            there is no NCCL transport to change (gloo is used): the baseline is measured once.
            """
        ),
        code(
            "bench = rt.steps.benchmark.run(cfg)\n"
            'rt.table([(b.label, b.job.status, f"{b.steps_per_s:.2f}", f"{b.tokens_per_s_per_gpu:,.0f}") '
            "for b in bench],\n"
            '         ["variant", "job", "steps/s", "tokens/s per worker"])',
            ignore_output=True,
        ),
        md(
            """
            **Reading it.** One row per variant. *tokens/s per worker* is the tokens each rank processes per
            second after warm-up (sequences per step × sequence length ÷ step time), averaged over ranks; *steps/s*
            is set by the slowest rank, since every step waits for all of them.
            """
        ),
        code("cmp = rt.steps.benchmark.compare(cfg, bench)\ncmp.show()"),
        md(
            """
            **Prediction against measurement.** Notebook 01 predicted tokens/s per GPU for each transport before
            anything ran; here the two sit side by side. An error within about 20 % means the model of the step
            (compute + FSDP traffic over the slowest link) explains what you measured; a much larger gap points
            at something the model leaves out: a slower link than the instance type promises, a transport
            fallback (the audit says), or a step dominated by overheads (tiny models, CPU workers).
            """
        ),
        code("rt.steps.benchmark.predicted(cfg, bench)"),
        md(
            """
            **Reading it.** Either a speedup with both audits confirmed, or `no speedup reported:` followed by the
            audit that failed. The record is saved as `runs/<run_name>/benchmark.json` with the settings and the
            host it ran on. The reference article reports about twice the throughput with EFA for this job on two
            `g6.12xlarge`; your figure depends on the model size, the sequence length and the batch: the larger the
            compute per step, the less the network shows.
            """
        ),
        code("rt.steps.benchmark.plot(bench);", ignore_output=True),
        code('rt.steps.display.equivalent_commands("benchmark", cfg)'),
        md("## 2. Check"),
        code('assert all(b.job.ok for b in bench), "a benchmark job failed"'),
    ],
    trouble=troubleshooting(
        "What this step diagnoses, the message it prints, and what to do about it.",
        [
            (
                "The comparison is refused",
                "`no speedup reported: run 'efa' was meant to use efa but its NCCL audit says fallback: ...`.",
                "the fast run was not fast: fix it as notebook 06's troubleshooting says (socket fallback), then "
                "run this notebook again.",
            ),
            (
                "The slow run did not use sockets",
                "`no speedup reported: run 'socket' was meant to use socket but its NCCL audit says unexpected: "
                "socket was expected but no rank pair uses NET/Socket`.",
                "with a single GPU node every pair stays inside the node: the baseline needs two or more GPU nodes "
                "on aws (`gpu_node_count`).",
            ),
            (
                "Only one variant (CPU)",
                "`no A/B comparison: CPU workers use gloo, there is no NCCL transport to change (run on GPUs for "
                "P2P vs socket, or on aws for EFA vs socket)`.",
                "nothing is wrong: run on GPUs or on aws to compare transports.",
            ),
            (
                "Out of memory during the benchmark",
                "a job FAILED with `torch.OutOfMemoryError: CUDA out of memory ...`.",
                "the benchmark uses the training sizes of your settings: lower `batch_size` or `seq_len`.",
            ),
        ],
    ),
)

# ==============================================================================================================
# 08 · Teardown
# ==============================================================================================================

TEARDOWN = notebook(
    "08_teardown",
    "08 · Teardown: remove everything, and prove it",
    learn=[
        "the order in which the stack comes down, and why it is the reverse of how it went up",
        "what keeps billing until it is deleted (GPU nodes, the NAT gateway, the control plane)",
        "how the step checks, by listing, that nothing it created is left",
    ],
    time="seconds on the local target; 15-20 minutes on aws (node group, then cluster).",
    prereqs=["for aws: `assume_yes=True` as a parameter (nothing is deleted without it)"],
    cost_minutes=20,
    creates=True,
    cells=[
        md(
            """
            ## 1. In reverse order

            Everything comes down in the reverse order it went up: the RayCluster (the operator deletes its
            pods), the KubeRay operator, the device plugins, the GPU node group, then the cluster with its VPC
            and NAT gateway. The order matters: deleting the cluster first would leave the operator no chance to
            clean up, and a node group still creating can block the VPC's deletion. On aws nothing is deleted
            without `assume_yes=True`; a headless run without it is refused, and never prompts.

            The GPU nodes are most of the bill (see the cost table at the top), and the NAT gateway and the
            control plane bill by the hour as long as they exist, used or not. The step only deletes what the
            tutorial created, by name, and then lists what is left to prove it is gone.

            On the local target, the step stops the raylets this tutorial started (and only those), then checks
            that their processes are gone.
            """
        ),
        code("gone = rt.steps.teardown.run(cfg, assume_yes=assume_yes)\ngone.show()"),
        md(
            """
            **Reading it.** One row per part, in the order it was removed, with what the final listing found.
            `refused:` means nothing was deleted and says how to confirm.
            """
        ),
        code('rt.steps.display.equivalent_commands("teardown", cfg)'),
        md("## 2. Check"),
        code('assert gone.ok, getattr(gone, "refused", "") or "something is left: see above"'),
    ],
    trouble=troubleshooting(
        "What this step diagnoses, the message it prints, and what to do about it.",
        [
            (
                "Refused (aws)",
                "`refused: teardown deletes the RayCluster ray-train/raytrain, the KubeRay operator, the device "
                "plugins, GPU node group 'gpu-efa' and EKS cluster raytrain-tutorial in us-west-2; nothing was "
                "deleted. Fix: pass assume_yes=True (notebook parameter assume_yes, CLI --yes) after checking the "
                "account and region`.",
                "check the account and region in the first lines of this notebook, then run it with `assume_yes=True`.",
            ),
            (
                "A node group or the cluster will not go (aws)",
                "`GPU node group 'gpu-efa' is DELETE_FAILED, not deleted. Fix: see the causes ...` or `cluster "
                "raytrain-tutorial is ..., not deleted. Fix: see the causes; run `down` again`.",
                "the causes usually name a resource created outside the tutorial in its VPC (a load balancer, an "
                "ENI): delete it, then run this notebook again.",
            ),
            (
                "Processes left behind (local)",
                "`2 process(es) of the local cluster did not stop (pids ...). Fix: run `raytrain-tutorial down` "
                "again`.",
                "as printed; the command stops only processes this tutorial started.",
            ),
        ],
    ),
)

NOTEBOOKS = {
    "01_capacity": CAPACITY,
    "02_cluster": CLUSTER,
    "03_plugins": PLUGINS,
    "04_kuberay": KUBERAY,
    "05_train": TRAIN,
    "06_verify": VERIFY,
    "07_benchmark": BENCHMARK,
    "08_teardown": TEARDOWN,
}


# ==============================================================================================================
# Writing, executing, normalising
# ==============================================================================================================


def write_sources(out_dir: Path = HERE) -> list[Path]:
    """Write every notebook (no outputs) to ``out_dir``; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, nb in NOTEBOOKS.items():
        path = out_dir / f"{name}.ipynb"
        nbformat.validate(nb)
        nbformat.write(nb, path)
        paths.append(path)
        print(f"wrote {path}")
    return paths


def merge_streams(outputs: list) -> list:
    """Consecutive stream outputs of the same name as one (what JupyterLab shows, and what nbval compares)."""
    merged: list = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if out.get("output_type") == "stream" and prev is not None and prev.get("output_type") == "stream":
            if prev.get("name") == out.get("name"):
                prev["text"] = prev["text"] + out["text"]
                continue
        merged.append(out)
    return merged


#: Machine details a committed output must not carry (checked in every cell nbval compares).
STALE = {
    "the throw-away runs folder": re.compile(r"/tmp/raytrain-refresh-\S+"),
    "an IP address": re.compile(r"\b(?!127\.0\.0\.1\b)\d{1,3}(\.\d{1,3}){3}\b"),
    "a dashboard link": re.compile(r"View the dashboard at"),
}


#: Lines of Ray's own logging (``2026-12-01 02:47:14,780\tINFO worker.py:...``) and its dashboard link: noise a
#: learner cannot act on, and machine details in a committed output.
RAY_LOG_LINE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d+\s+INFO |View the dashboard at")


def scrub(text: str, runs_root: str) -> str:
    """An ignored output as committed: the throw-away runs folder shown as ``runs``, this checkout's path
    dropped, Ray's INFO lines and dashboard link removed, node addresses masked."""
    text = text.replace(runs_root, "runs").replace(str(REPO) + "/", "")
    lines = [line for line in text.split("\n") if not RAY_LOG_LINE.search(line)]
    return STALE["an IP address"].sub("<node ip>", "\n".join(lines))


def normalise(nb: nbformat.NotebookNode, runs_root: str) -> list[str]:
    """Make an executed notebook open unmodified in JupyterLab and diff cleanly; returns warnings about machine
    details left in outputs that nbval compares (those must be fixed where they are printed)."""
    nb.metadata.pop("papermill", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata.pop("widgets", None)
    warnings = []
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        cell.outputs = merge_streams(cell.outputs)
        ignored = cell.source.startswith(IGNORE)
        for out in cell.outputs:
            if ignored and "text" in out:  # compared outputs stay as printed: nbval's sanitizers handle paths
                out["text"] = scrub(out["text"], runs_root)
            text = out.get("text") or (out.get("data") or {}).get("text/plain", "")
            for what, pattern in STALE.items():
                if not ignored and pattern.search(str(text)):
                    warnings.append(f"cell {cell.get('id')}: {what} in a compared output")
    return warnings


def refresh(paths: list[Path]) -> None:
    """Execute the notebooks in order, in place, exactly as nbval will (no injected parameters), with a
    throw-away runs/ directory, then normalise them (:func:`normalise`)."""
    import os

    import papermill as pm

    with tempfile.TemporaryDirectory(prefix="raytrain-refresh-") as tmp:
        runs_root = str(Path(tmp) / "runs")
        os.environ["RAYTRAIN_RUNS_DIR"] = runs_root
        for path in paths:
            print(f"executing {path.name}", flush=True)
            pm.execute_notebook(str(path), str(path), cwd=str(HERE), kernel_name="python3", progress_bar=False)
            nb = nbformat.read(path, as_version=4)
            for warning in normalise(nb, runs_root):
                print(f"  {path.name}: {warning}")
            nbformat.validate(nb)
            nbformat.write(nb, path)


def main(argv: list[str]) -> int:
    if "--out" in argv:
        out_dir = Path(argv[argv.index("--out") + 1]).resolve()
    elif "--no-execute" in argv:
        out_dir = Path(tempfile.mkdtemp(prefix="raytrain-notebooks-"))
    else:
        out_dir = HERE
    if "--refresh" in argv and out_dir != HERE:
        print("--refresh executes the notebooks in notebooks/ only; leave out --out/--no-execute")
        return 2
    paths = write_sources(out_dir)
    if "--refresh" in argv:
        refresh(paths)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
