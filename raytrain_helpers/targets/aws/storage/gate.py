"""Step 02 on aws: the checkpoint storage proven from inside the cluster before the GPU node group is created.

Once the cluster, its system node group and the storage (bucket, role, association) exist, and before eksctl
creates the GPU node group (the billed GPU time), a one-off pod on the system node - with the tutorial's
ServiceAccount and the Ray Train DLC image, which also pre-pulls the Ray head's image on that node - runs the job's
own storage code (:mod:`.storage_check`, exactly as 04 runs it in the Ray pods). A denied call stops 02 with the
same named rows as 04 (the step, the S3 operation, the IAM action missing, the fix). The pod is deleted on every
exit, a failure or an interrupt included.

The namespace and the ServiceAccount the association binds are applied here (server-side apply: 04 applies the
same objects again, unchanged).
"""

from __future__ import annotations

import time
from typing import Any

from ....clients import kubernetes as kube
from ....core.config import Settings
from ....plan import iam, walkthrough
from ....plan.kube_objects import PART_OF, PART_OF_LABEL, phase_of, pod_problem
from ....plan.raycluster import render_namespace
from . import bucket as storage
from . import check as storage_check
from . import identity

#: The check pod's name (in the tutorial's namespace).
POD_NAME = "raytrain-storage-check"
#: How long the pod may take to start: the first pull of the multi-GB DLC image on the system node (the walkthrough
#: estimate budgets the same).
START_TIMEOUT_S = int(walkthrough.IMAGE_PULL_MIN * 60)
POLL_S = 5.0
#: How many check pods at most when a pod starts without EKS Pod Identity's credentials, and the wait before each new
#: one: associations are eventually consistent, "may take several seconds to be effective" (AWS CLI reference,
#: ``eks create-pod-identity-association``), and the webhook sets the variables only when a pod is created.
POD_TRIES = 3
INJECTION_WAIT_S = 15.0


def description(settings: Settings) -> str:
    """The action line ``plan`` and ``up`` show."""
    k = settings.kubernetes
    return (
        f"check the checkpoint storage from a one-off pod {k.namespace}/{POD_NAME} on the system node "
        f"(ServiceAccount {k.service_account}, image {settings.versions.dlc_image}: the job's own pyarrow calls "
        f"under the run's prefix); the GPU node group is created only when it passes; the pod is deleted after"
    )


def check_pod(settings: Settings) -> dict[str, Any]:
    """The one-off pod: the DLC image idling on the system node, the check sent to it by exec."""
    k = settings.kubernetes
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": POD_NAME,
            "namespace": k.namespace,
            "labels": {PART_OF_LABEL: PART_OF, "app.kubernetes.io/component": "storage-check"},
        },
        "spec": {
            "serviceAccountName": k.service_account,
            "restartPolicy": "Never",
            "nodeSelector": {"role": "system"},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "check",
                    "image": settings.versions.dlc_image,
                    "command": ["sleep", "3600"],  # an upper bound: the pod is deleted as soon as the check ends
                    # as the Ray pods: the region from the settings, never from the instance metadata service
                    # (denied to pods), so the SDK neither asks it nor waits for it
                    "env": [
                        {"name": "AWS_REGION", "value": settings.aws.region},
                        {"name": "AWS_DEFAULT_REGION", "value": settings.aws.region},
                        {"name": "AWS_EC2_METADATA_DISABLED", "value": "true"},
                    ],
                }
            ],
        },
    }


def run(
    settings: Settings,
    *,
    client=None,
    timeout_s: float = START_TIMEOUT_S,
    poll_s: float = POLL_S,
    injection_wait_s: float | None = None,
    log=print,
) -> tuple[bool, list[str]]:
    """Apply the namespace, the ServiceAccount and the check pod, wait for it to run, run the storage check in it;
    (ok, lines). A pod that started without EKS Pod Identity's credentials is deleted and created again after
    ``injection_wait_s`` (:data:`INJECTION_WAIT_S`), at most :data:`POD_TRIES` pods in all, each retry a line.
    The pod is deleted in every case (a ``KeyboardInterrupt`` included, which is raised again)."""
    loc = identity.location(settings)
    wait_s = INJECTION_WAIT_S if injection_wait_s is None else injection_wait_s
    with kube.using_client(settings, client) as api:
        kube.apply(api, render_namespace(settings))
        kube.apply(api, storage.service_account(settings))
        try:
            for attempt in range(1, POD_TRIES + 1):
                started, steps = _check_once(api, settings, loc, timeout_s, poll_s, log)
                if started:
                    return False, [started]
                if not identity.not_injected(steps) or attempt == POD_TRIES:
                    break
                log(
                    f"storage check: pod {settings.kubernetes.namespace}/{POD_NAME} started without EKS Pod Identity's "
                    f"credentials ({steps[0].get('error', '')}); an association takes seconds to be effective and "
                    f"only a new pod gets them: creating it again in {wait_s:g} s "
                    f"(pod {attempt + 1} of {POD_TRIES})"
                )
                _delete(api, settings)
                time.sleep(wait_s)
        finally:
            _delete(api, settings)
    if identity.passed(steps):
        done = ", ".join(storage_check.STEPS[2:])
        runs = steps[0].get("arn") or iam.role_name(settings)
        return True, [
            f"storage check from pod {POD_NAME} (the pods' ServiceAccount): {done} under {loc.uri}/ OK, running as "
            f"{runs}"
        ]
    return False, [
        identity.failure(POD_NAME, steps, loc, settings),
        *identity.step_rows(POD_NAME, steps, loc, settings),
    ]


def _check_once(api, settings: Settings, loc, timeout_s: float, poll_s: float, log) -> tuple[str, list]:
    """A new check pod, the check run in it: ('', steps), or (why the pod did not run, [])."""
    _delete(api, settings)  # a pod left by a run killed outright, or the one without credentials
    kube.apply(api, check_pod(settings))
    log(f"storage check: pod {settings.kubernetes.namespace}/{POD_NAME} applied, waiting for it to run")
    started = _wait_running(api, settings, timeout_s, poll_s)
    if started:
        return started, []
    return "", identity.check_in(api, settings, POD_NAME, loc)


def _wait_running(api, settings: Settings, timeout_s: float, poll_s: float) -> str:
    """'' once the pod runs, else why it did not (the API's own words)."""
    ns = settings.kubernetes.namespace

    def probe():
        pod = kube.get(api, "v1", "Pod", POD_NAME, ns)
        return pod is not None and phase_of(pod) in ("Running", "Failed", "Succeeded"), pod

    waited = kube.wait_for(probe, timeout_s, interval_s=poll_s)
    pod = waited.value if isinstance(waited.value, dict) else None
    if waited.ok and pod is not None and phase_of(pod) == "Running":
        return ""
    why = pod_problem(pod) if pod else str(waited.value or "not found")
    return (
        f"storage check pod {ns}/{POD_NAME} did not run within {timeout_s:g} s: {why}. Fix: see `kubectl describe "
        f"pod -n {ns} {POD_NAME}` (the system node, the image {settings.versions.dlc_image}); re-run `up`"
    )


def _delete(api, settings: Settings) -> None:
    """Delete the pod and wait (briefly) until the API no longer lists it."""
    ns = settings.kubernetes.namespace
    kube.delete(api, "v1", "Pod", POD_NAME, ns)
    deadline = time.monotonic() + 60
    while kube.get(api, "v1", "Pod", POD_NAME, ns) is not None and time.monotonic() < deadline:
        time.sleep(0.2)


__all__ = ["POD_NAME", "check_pod", "description", "run"]
