"""What the whole walkthrough costs on aws: minutes of cluster per notebook, and USD from the stack's hourly price.

Offline and without credentials: the settings, the price table (:mod:`.cost`) and the step-time prediction
(:mod:`.perf`). The stack bills from ``eksctl create cluster`` in notebook 02 until notebook 08 has deleted it; 01
creates nothing billed. Every billed minute is charged at the whole stack's hourly price (GPU nodes, system
node, control plane, NAT gateway), although the GPU nodes exist only from their node group on: an upper bound.

Nothing here was measured on AWS: the fixed allowances (:data:`ALLOWANCES`) are estimates, each with where its
figure comes from, and the notebooks' headers quote them (one source: a test keeps the headers equal to
:func:`chapter_minutes`). Training and benchmark time are predicted, not typed: ``steps`` (and
``bench_steps``) times the predicted step of :func:`.perf.predict_aws` over EFA (and over sockets for 07's
second job), plus the allowance for a job to start.
"""

from __future__ import annotations

import datetime as dt
import json
import textwrap
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.settings import Settings
from ..core.tables import MAX_WIDTH, format_table
from . import cost, perf, prepull

#: Minutes the first pull of the Ray Train DLC (several GB) takes on a fresh node. Not measured: this project has not
#: pulled the image on AWS. It is the figure the waits are built around (02's storage check waits 30 min for the
#: system node's pull, 04 waits 45 min for the GPU nodes'), so the estimate budgets the same, once in 02 (the system
#: node, before the GPU nodes exist) and once in 04 (the GPU nodes, pulling at the same time).
IMAGE_PULL_MIN = 30.0

#: Minutes each fixed part takes on aws, and the source of the figure. Every chapter's header quotes these (a test
#: keeps them equal), and the code that waits on a part waits at least as long.
ALLOWANCES: dict[str, tuple[float, str]] = {
    "cluster": (20.0, "eksctl create cluster: VPC, EKS control plane, system node group; the control plane alone "
                      "'in 9 minutes on an average' (AWS's figure quoted in github.com/aws/containers-roadmap/"
                      "issues/1227, whose users report 14 to 21 minutes end to end; checked 2026-12-06), "
                      "the rest assumed"),
    "image_pull": (IMAGE_PULL_MIN, "the first pull of the multi-GB DLC image on a fresh node: an assumption, not "
                                   "a measurement (the storage check waits 30 min for it, 04 waits 45)"),
    "gpu_nodegroup": (10.0, "eksctl create nodegroup: the EFA GPU node group in one AZ (CloudFormation, the "
                            "instances booting and joining); assumed"),
    "plugins": (5.0, "Helm installs the NVIDIA and EFA device plugins, their DaemonSets pull small images; assumed"),
    "kuberay": (5.0, "the KubeRay operator (Helm) and the RayCluster applied, the head Ready and the Jobs API "
                     "answering once the image is on the nodes; assumed"),
    "job_start": (10.0, "one Ray job from submission to its first step: runtime_env, the model download, the "
                        "worker group; assumed"),
    "export": (5.0, "05's end: the last sharded checkpoint and the exported model written to storage; assumed"),
    "verify": (5.0, "06 reads the job's logs and the checkpoints and checks the transport; assumed"),
    "teardown": (20.0, "eksctl deletes the GPU node group, then the cluster and its VPC (CloudFormation); assumed "
                       "from the create times"),
}  # fmt: skip


@dataclass
class Phase:
    """One notebook's share: what runs, billed minutes, and where the figure comes from."""

    notebook: str
    what: str
    minutes: float
    source: str


@dataclass
class Walkthrough:
    """The whole walkthrough on aws: one :class:`Phase` per notebook, the billed minutes and their price."""

    phases: list[Phase]
    usd_per_hour: float | None
    region: str
    as_of: str
    shape: str
    notes: list[str] = field(default_factory=list)

    @property
    def minutes(self) -> float:
        return sum(p.minutes for p in self.phases)

    @property
    def usd(self) -> float | None:
        return None if self.usd_per_hour is None else self.usd_per_hour * self.minutes / 60

    def line(self) -> str:
        """One line: the docs and the README quote it, a test keeps them equal to this function's output."""
        price = "USD ?" if self.usd is None else f"about USD {self.usd:.2f} at USD {self.usd_per_hour:.2f}/h"
        return (
            f"The whole walkthrough (02-08) keeps about {self.minutes:.0f} minutes of cluster: {price} for "
            f"{self.shape} in {self.region}, list prices of {self.as_of}."
        )

    def text(self) -> str:
        rows = [(p.notebook, p.what, f"{p.minutes:.1f}") for p in self.phases]
        rows.append(("total", "billed minutes of the stack", f"{self.minutes:.1f}"))
        parts = [textwrap.fill(self.line(), MAX_WIDTH), format_table(rows, ["notebook", "what", "min"], title=None)]
        parts += [textwrap.fill(f"note: {n}", MAX_WIDTH, subsequent_indent="  ") for n in self.notes]
        return "\n".join(parts)

    def sources(self) -> list[str]:
        """Where each figure comes from, one line per phase."""
        return [f"{p.notebook} {p.what}: {p.source}" for p in self.phases]

    def show(self) -> None:
        print(self.text())

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(minutes=self.minutes, usd=self.usd)
        return d

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)


def _fixed(notebook: str, what: str, *keys: str) -> Phase:
    minutes = sum(ALLOWANCES[k][0] for k in keys)
    return Phase(notebook, what, minutes, "; ".join(ALLOWANCES[k][1] for k in keys))


def _gpu_pull_phase(settings: Settings) -> Phase:
    """04: the operator and the RayCluster, and the GPU nodes' pull of the image: the assumed
    :data:`IMAGE_PULL_MIN`, or the longest pull recorded in the run's folder (``image-pulls.json``, written by 04
    from the kubelet's events; the pre-pull DaemonSet starts it in 03, so this bounds what is left of it in 04)."""
    phase = _fixed("04", "KubeRay operator, RayCluster (image pull on the GPU nodes)", "kuberay", "image_pull")
    recorded = prepull.recorded_minutes(settings)
    if recorded is None:
        return phase
    phase.minutes = ALLOWANCES["kuberay"][0] + recorded
    phase.what = f"KubeRay operator, RayCluster (image pull on the GPU nodes: {recorded:.1f} min recorded)"
    phase.source = (
        f"{ALLOWANCES['kuberay'][1]}; the longest pull of {settings.versions.dlc_image} on a GPU node recorded in "
        f"runs/{settings.run_name}/{prepull.RECORD} (the kubelet's Pulled events)"
    )
    return phase


def estimate(
    settings: Settings,
    prices: Mapping[str, Any] | str | Path | None = None,
    *,
    today: dt.date | None = None,
) -> Walkthrough:
    """Minutes of cluster per notebook for ``settings`` (its aws group and train group, whatever its target) and
    their price at the stack's hourly estimate (:func:`.cost.estimate` in ``aws.region``)."""
    a, t = settings.aws, settings.train
    est = cost.estimate(settings, a.region, prices, today=today)
    usd_per_hour = est.total_per_hour if est.complete else None
    efa = perf.predict_aws(settings, transport="efa", prices=prices)
    sock = perf.predict_aws(settings, transport="socket", prices=prices)
    job = ALLOWANCES["job_start"][0]
    train_min = efa.time_s / 60
    bench_min = t.bench_steps * (efa.step_s + sock.step_s) / 60
    phases = [
        Phase("01", "capacity, quota, plan (read-only API calls)", 0.0, "creates nothing billed"),
        _fixed(
            "02", "EKS cluster, storage check (image pull), GPU node group", "cluster", "image_pull", "gpu_nodegroup"
        ),
        _fixed("03", "device plugins", "plugins"),
        _gpu_pull_phase(settings),
        Phase(
            "05",
            f"training: job start, {t.steps} steps x {perf.step_text(efa.step_s)} predicted, export",
            job + train_min + ALLOWANCES["export"][0],
            f"{ALLOWANCES['job_start'][1]}; steps x the step predicted by plan/perf.py over EFA "
            f"({efa.world_size} x {efa.gpu}, batch {efa.batch_size} x {efa.seq_len}); {ALLOWANCES['export'][1]}",
        ),
        _fixed("06", "verification", "verify"),
        Phase(
            "07",
            f"benchmark: 2 jobs (EFA, sockets) of {t.bench_steps} steps",
            2 * job + bench_min,
            f"two jobs, each {ALLOWANCES['job_start'][1]}; bench_steps x the steps predicted by plan/perf.py over "
            "EFA and over NCCL sockets",
        ),
        _fixed("08", "teardown (node group, then cluster)", "teardown"),
    ]
    notes = [
        "every billed minute is charged at the whole stack's hourly price (the GPU nodes start only with their "
        "node group): an upper bound",
        *est.notes,
    ]
    if t.job_timeout_s:
        notes.append(f"05 stops the job after train.job_timeout_s = {t.job_timeout_s} s")
    shape = f"{a.gpu_node_count} x {a.gpu_node_type}"
    return Walkthrough(phases, usd_per_hour, a.region, est.as_of, shape, notes)


def chapter_minutes(settings: Settings, notebook: str) -> float:
    """The minutes of cluster :func:`estimate` allows notebook ``notebook`` ("01".."08") on aws: what each chapter's
    first cell prices, and what its header quotes at the defaults."""
    return next(p.minutes for p in estimate(settings).phases if p.notebook == notebook)
