"""03 and 04 on target=aws against three broken clusters (the Kubernetes API stand-in): each notebook fails
headless with the diagnosis its helper prints. Independent of the ordered flow in test_aws_notebooks.py, so these
run on another pytest-xdist worker."""

from __future__ import annotations

import pytest

from tests.fakes.k8s_standin import standin
from tests.notebooks.test_aws_notebooks import CONTEXT, env, run_nb, work  # noqa: F401,F811  (module fixtures)

pytestmark = [pytest.mark.notebooks, pytest.mark.timeout(300)]


@pytest.mark.parametrize(
    "scenario,notebook,diagnosis",
    [
        (
            "plugin-desired-0",
            "03_plugins",
            [
                "stopped waiting, a device plugin's DaemonSet does not admit the GPU nodes",
                "DESIRED 0 for 2 GPU node(s)",
                "lacks the label role=gpu-worker",
                "label role=gpu-worker (nodeSelector) missing",
            ],
        ),
        (
            "pods-pending",
            "04_kuberay",
            [
                "the nodes cannot host the RayCluster; nothing was applied",
                "untolerated taint dedicated=ml-training:NoSchedule",
            ],
        ),
        (
            "head-never-ready",
            "04_kuberay",
            [
                "stopped waiting, a pod is crash-looping",
                "restarted 3 times without becoming Ready",
                "is Running but not Ready",
                "RAY_VERSION differs from the image's Ray",
            ],
        ),
    ],
)
def test_03_04_fail_headless_with_the_diagnosis(scenario, notebook, diagnosis, env, work):  # noqa: F811
    # set_env: KUBECONFIG at the stand-in and the fake helm (which 03 and 04 require) first on PATH, for the kernel
    with standin(scenario, context=CONTEXT, delay_s=0.05, set_env=True):
        text = run_nb(notebook, work, fails=True)
    assert "AssertionError" in text and ("devices are not allocatable" in text or "RayCluster is not ready" in text)
    for d in diagnosis:
        assert d in text, f"{scenario}: {d!r} not in the notebook's output"
