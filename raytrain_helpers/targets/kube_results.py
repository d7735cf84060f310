"""What the device-plugin step (03) and the RayCluster step (04) return on every target: a flag, a message and
plain-text tables (``show()``), so a notebook prints the same shape of report on local and on aws.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.tables import table


@dataclass
class KubeRayResult:
    """The KubeRay operator and the RayCluster (or what stands in for them)."""

    target: str
    action: str
    ok: bool
    message: str = ""
    problems: list[str] = field(default_factory=list)
    diagnosis: list[str] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    mapping: list[tuple[str, str, str]] = field(default_factory=list)
    manifest_yaml: str = ""
    install_method: str = ""
    state: str = ""
    deleted: list[tuple[str, str]] = field(default_factory=list)
    elapsed_s: float = 0.0

    def pod_rows(self) -> list[tuple]:
        return [
            (p["pod"], p["role"], p["phase"], "yes" if p["ready"] else "no", p["node"], p["instance_type"], p["zone"])
            for p in self.pods
        ]

    def show(self) -> None:
        print(
            f"KubeRay ({self.target}, {self.action}): {'OK' if self.ok else 'NOT OK'}"
            + (f" - {self.message}" if self.message else "")
        )
        if self.install_method:
            print(f"  operator installed with: {self.install_method}")
        if self.state:
            print(f"  RayCluster state: {self.state}")
        if self.manifest_yaml:
            print("RayCluster manifest (abridged; `raytrain-tutorial render --out DIR` writes it in full):")
            print(self.manifest_yaml.rstrip())
        if self.mapping:
            table(
                self.mapping,
                ["RayCluster manifest", "local stand-in", "found"],
                title="What stands in for each part of the manifest on this machine",
            )
        if self.pods:
            table(
                self.pod_rows(),
                ["pod", "role", "phase", "ready", "node", "instance type", "zone"],
                title="Pod placement",
            )
        if self.deleted:
            table(self.deleted, ["object", "state"], title="Teardown (verified by listing)")
        for problem in self.problems:
            print(f"  PROBLEM: {problem}")
        for line in self.diagnosis:
            print(f"  DIAGNOSIS: {line}")


@dataclass
class PluginsResult:
    """The device plugins and the devices each node offers (or the local raylets' devices)."""

    target: str
    action: str
    ok: bool
    message: str = ""
    nodes: list[dict[str, Any]] = field(default_factory=list)
    diagnosis: list[str] = field(default_factory=list)
    install_method: str = ""
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)
    elapsed_s: float = 0.0

    def show(self) -> None:
        print(
            f"device plugins ({self.target}, {self.action}): {'OK' if self.ok else 'NOT OK'}"
            + (f" - {self.message}" if self.message else "")
        )
        if self.install_method:
            print(f"  installed with: {self.install_method}")
        if self.target == "local" and self.nodes:
            table(
                [(n["node"], n["role"], n["gpus"], n["backend"], n["train_slots"], n["state"]) for n in self.nodes],
                ["node", "role", "GPUs", "backend", "train slots", "state"],
                title="Devices and collective backends per local node (no device plugins locally)",
            )
        elif self.nodes:
            table(
                [
                    (n["name"], n["instance_type"], n["zone"], n["gpu_str"], n["efa_str"], n["verdict"])
                    for n in self.nodes
                ],
                ["node", "instance type", "zone", "nvidia.com/gpu", "vpc.amazonaws.com/efa", "verdict"],
                title="Allocatable on the GPU nodes",
            )
        if self.daemonsets:
            table(
                [(d["name"], d["desired"], d["ready"], d["available"]) for d in self.daemonsets],
                ["DaemonSet (kube-system)", "desired", "ready", "available"],
            )
        if self.deleted:
            table(self.deleted, ["object", "state"], title="Teardown (verified by listing)")
        for line in self.diagnosis:
            print(f"  DIAGNOSIS: {line}")


__all__ = ["KubeRayResult", "PluginsResult"]
