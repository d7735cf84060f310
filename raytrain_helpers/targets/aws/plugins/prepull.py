"""The Ray Train image pulled on the GPU nodes from step 03 on (:mod:`raytrain_helpers.plan.prepull`): 03 applies the
pre-pull DaemonSet before it installs the device plugins; 04, once its Ray pods run, records each node's pull time
from the kubelet's ``Pulled`` events into the run's folder and deletes the DaemonSet. Only a DaemonSet carrying the
tutorial's ``app.kubernetes.io/managed-by`` label is changed or deleted; another of that name is left alone.
"""

from __future__ import annotations

from ....clients import kubernetes as kube
from ....core.settings import Settings
from ....plan import prepull
from ....plan.kube_objects import labels

MANAGED_BY = ("app.kubernetes.io/managed-by", "raytrain-tutorial")


def _ours(obj: dict | None) -> bool:
    return obj is not None and labels(obj).get(MANAGED_BY[0]) == MANAGED_BY[1]


def start(client, settings: Settings, *, log=print) -> str:
    """Apply the pre-pull DaemonSet (idempotent); returns a note for the step's result."""
    ns, name = settings.kubernetes.namespace, prepull.NAME
    if kube.get(client, "v1", "Namespace", ns) is None:
        return f"image pre-pull: namespace {ns} does not exist yet (02 creates it): 04 pulls the image instead"
    existing = kube.get(client, "apps/v1", "DaemonSet", name, ns)
    if existing is not None and not _ours(existing):
        return f"image pre-pull: DaemonSet {ns}/{name} exists and is not the tutorial's: left alone, not used"
    kube.apply(client, prepull.render_prepull(settings))
    log(f"image pre-pull: DaemonSet {ns}/{name} pulls {settings.versions.dlc_image} on each GPU node")
    return f"image pre-pull: the GPU nodes pull {settings.versions.dlc_image} from now on (DaemonSet {ns}/{name})"


def finish(client, settings: Settings, pods: list[dict], *, log=print) -> dict[str, float]:
    """Record each GPU node's pull time of the run's image (the kubelet's ``Pulled`` events of the pre-pull pods and
    of ``pods``, the Ray pods) into the run's folder, then delete the tutorial's pre-pull DaemonSet. Returns the
    times recorded ({node: seconds})."""
    ns, name, image = settings.kubernetes.namespace, prepull.NAME, settings.versions.dlc_image
    ours = _ours(kube.get(client, "apps/v1", "DaemonSet", name, ns))
    pulling = (
        kube.list_objects(client, "v1", "Pod", ns, label_selector=f"app.kubernetes.io/name={name}") if ours else []
    )
    events = kube.list_objects(client, "v1", "Event", ns)
    times = prepull.pull_times(events, [*pulling, *pods], image)
    path = prepull.save(settings, times, source="the kubelet's Pulled events (pre-pull DaemonSet and Ray pods)")
    if path:
        log("image pull: " + ", ".join(f"{n} {s / 60:.1f} min" for n, s in sorted(times.items())) + f" -> {path}")
    if ours:
        kube.delete(client, "apps/v1", "DaemonSet", name, ns)
        log(f"image pre-pull: DaemonSet {ns}/{name} deleted (the image is on the nodes)")
    return times


def stop(client, settings: Settings) -> bool:
    """Delete the tutorial's pre-pull DaemonSet if it is still there (08, or 04 never got its pods running)."""
    ns, name = settings.kubernetes.namespace, prepull.NAME
    if not _ours(kube.get(client, "apps/v1", "DaemonSet", name, ns)):
        return False
    return kube.delete(client, "apps/v1", "DaemonSet", name, ns)


__all__ = ["finish", "start", "stop"]
