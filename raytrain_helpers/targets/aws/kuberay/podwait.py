"""Progress of the RayCluster's pods while notebook 04 waits for them, read from their Kubernetes Events.

The first start on fresh GPU nodes pulls the Ray Train DLC (several GB) on the system node and on every GPU
node: about 30 min in which a pod only says ``Pending``/``ContainerCreating``. The scheduler and the kubelet
record where each pod is as core/v1 Events about it: ``Scheduled`` (or ``FailedScheduling``), ``Pulling``,
``Pulled`` (with the time the pull took and the image size), ``Created``, ``Started``, and Warnings such as
``Failed``/``BackOff``/``Unhealthy``. :class:`PodProgress` shows each new event once, with the time since
the wait began and since the pod was created, and a line every :data:`HEARTBEAT_S` while nothing new
happens (a long pull).

Re-running the step while the pods are still coming up does not recreate anything (the RayCluster is applied
with the same spec, a no-op) and waits on the same pods: the events those pods had before the apply (what the
earlier run showed, or happened since) are summarised in one line per pod; only the events after it are shown
one by one. Nothing is stored between runs: the cluster's own events are the record.

Then :func:`wait_for_jobs_api`: with KubeRay >= 1.6 and Ray >= 2.53 the head's readiness probe asks only the
dashboard agent (port 52365), so a Ready head does not mean the Ray Jobs API on 8265 answers yet (the cause of
ray-project/kuberay#4760, fixed in 1.7.0 for KubeRay's own RayJob submitter only; docs/pins.md). Notebook 05
submits through that API, so 04 waits until ``/api/version`` answers through a port-forward.

Also here: :func:`crash_looping`, the pod states that waiting does not cure.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ....clients import kubernetes as kube
from ....clients.rayjobs import auth_headers
from ....core.constants import DASHBOARD_PORT
from ....core.settings import Settings
from ....plan.kube_objects import name_of, pod_ready

#: Container states that do not get better by waiting (the image or the pod spec must change).
HOPELESS_WAITING = ("CrashLoopBackOff", "InvalidImageName", "CreateContainerConfigError", "ErrImageNeverPull")
#: A container that restarted this often without becoming Ready is crash-looping.
CRASH_RESTARTS = 3
#: A line about the pods that are not Ready when nothing new was shown for this long (a multi-GB pull).
HEARTBEAT_S = 60.0
#: The events of a pod's way to Running, in order (the summary of earlier events lists them in this order).
PROGRESS_REASONS = ("Scheduled", "Pulling", "Pulled", "Created", "Started")
MAX_MESSAGE = 220


def crash_looping(pod: dict) -> str:
    """Why a pod will not become Ready by waiting ("" = it may still): a container in CrashLoopBackOff
    (or another state only a fix ends), or restarted CRASH_RESTARTS times without being Ready."""
    if pod_ready(pod):
        return ""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in HOPELESS_WAITING:
            return f"container {cs.get('name')} {waiting['reason']} (restarts {cs.get('restartCount', 0)})"
        if (cs.get("restartCount") or 0) >= CRASH_RESTARTS and not cs.get("ready"):
            last = ((cs.get("lastState") or {}).get("terminated")) or {}
            return f"container {cs.get('name')} restarted {cs['restartCount']} times without becoming Ready" + (
                f" (last exit: {last.get('reason')} {last.get('exitCode')})" if last else ""
            )
    return ""


# ============================================================================================
# Event fields
# ============================================================================================


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp of the API (``2026-12-04T16:00:00Z``, or with fractions) as an aware datetime."""
    if not value or not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def event_time(event: dict) -> datetime | None:
    """When the event last happened: ``lastTimestamp``, else ``eventTime`` (events.k8s.io recorders), else
    ``firstTimestamp`` (core/v1 Event fields)."""
    series = event.get("series") or {}
    for value in (event.get("lastTimestamp"), series.get("lastObservedTime"), event.get("eventTime")):
        if (t := parse_time(value)) is not None:
            return t
    return parse_time(event.get("firstTimestamp"))


def duration(seconds: float) -> str:
    """``38s``, ``4m12s``, ``1h02m``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def event_message(event: dict) -> str:
    """The event's message on one line, an image size in bytes also in GB."""
    msg = " ".join(str(event.get("message") or "").split())
    m = re.search(r"Image size: (\d+) bytes", msg)
    if m:
        msg = msg.replace(m.group(0), f"{m.group(0)} ({int(m.group(1)) / 1e9:.1f} GB)")
    return msg if len(msg) <= MAX_MESSAGE else msg[: MAX_MESSAGE - 3] + "..."


def _event_key(event: dict) -> str:
    md = event.get("metadata") or {}
    return str(md.get("uid") or f"{md.get('namespace')}/{md.get('name')}")


def _order(event: dict) -> tuple:
    """Oldest first; within the API's whole second, a pod's way to Running in its order (Pulled before Created
    before Started), then by resourceVersion."""
    floor = datetime.min.replace(tzinfo=timezone.utc)
    reason = str(event.get("reason"))
    rank = PROGRESS_REASONS.index(reason) if reason in PROGRESS_REASONS else len(PROGRESS_REASONS)
    rv = str((event.get("metadata") or {}).get("resourceVersion") or "0")
    return (event_time(event) or floor, rank, int(rv) if rv.isdigit() else 0)


def _now() -> datetime:
    return datetime.now(timezone.utc)


# ============================================================================================
# Progress
# ============================================================================================


@dataclass
class PodProgress:
    """Shows the events of the pods it is given, once each (see the module's docstring).

    ``role_of(pod)`` names a pod (``head``/``worker``); ``elapsed()`` is the time since the step began."""

    client: Any
    namespace: str
    log: Callable[[str], Any]
    role_of: Callable[[dict], str]
    elapsed: Callable[[], float]
    heartbeat_s: float = HEARTBEAT_S
    shown: set[str] = field(default_factory=set)
    earlier: set[str] = field(default_factory=set)
    summarised: bool = False
    unreadable: bool = False
    last_line: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)

    def say(self, text: str) -> None:
        line = f"  [{self.elapsed():5.0f}s] {text}"
        self.log(line)
        self.lines.append(line)
        self.last_line = time.monotonic()

    def remember(self, pods: list[dict]) -> None:
        """Before the RayCluster is applied: the events its pods have now (a re-run's) are an earlier run's,
        summarised at the first :meth:`update` instead of shown again. None when there are no pods yet."""
        try:
            self.earlier |= {_event_key(ev) for _, ev in self.events_of(pods)} if pods else set()
        except kube.K8sError:
            pass  # update() says so

    def events_of(self, pods: list[dict]) -> list[tuple[dict, dict]]:
        """(pod, event) for every event about one of ``pods`` (matched by name and uid), oldest first."""
        by_name = {name_of(p): p for p in pods}
        events = kube.list_objects(self.client, "v1", "Event", self.namespace, field_selector="involvedObject.kind=Pod")
        pairs = []
        for ev in events:
            io = ev.get("involvedObject") or {}
            pod = by_name.get(io.get("name"))
            uid = (pod or {}).get("metadata", {}).get("uid")
            if pod is not None and (not io.get("uid") or not uid or io["uid"] == uid):
                pairs.append((pod, ev))
        return sorted(pairs, key=lambda pe: _order(pe[1]))

    def update(self, pods: list[dict]) -> list[str]:
        """Show what is new since the last call; returns the lines shown. Never raises for unreadable events
        (RBAC may hide them): says so once and goes on with the pods' states alone."""
        before = self.last_line
        self.lines = []
        try:
            pairs = self.events_of(pods)
            fresh = [(p, e) for p, e in pairs if _event_key(e) not in self.shown]
            if not self.summarised:
                self.summarised = True
                fresh = self._summarise_earlier(fresh)
            for pod, ev in fresh:
                self.shown.add(_event_key(ev))
                self.say(self.event_line(pod, ev))
            if self.last_line == before and time.monotonic() - before >= self.heartbeat_s:
                self._heartbeat(pods, pairs)
        except kube.K8sError as e:
            if not self.unreadable:
                self.unreadable = True
                self.say(f"pod events unreadable ({e}); waiting on the pods' states alone")
        return self.lines

    def _summarise_earlier(self, pairs: list[tuple[dict, dict]]) -> list[tuple[dict, dict]]:
        """One line per pod for the events :meth:`remember` saw; returns the others."""
        earlier: dict[str, list[dict]] = {}
        later = []
        pods: dict[str, dict] = {}
        for pod, ev in pairs:
            if _event_key(ev) in self.earlier:
                earlier.setdefault(name_of(pod), []).append(ev)
                pods[name_of(pod)] = pod
                self.shown.add(_event_key(ev))
            else:
                later.append((pod, ev))
        for name, evs in earlier.items():
            self.say(self.summary_line(pods[name], evs))
        return later

    def summary_line(self, pod: dict, events: list[dict]) -> str:
        reasons = [str(e.get("reason")) for e in events]
        ordered = [r for r in PROGRESS_REASONS if r in reasons]
        ordered += sorted({r for r in reasons if r not in PROGRESS_REASONS})
        last = events[-1]
        t = event_time(last)
        ago = f" {duration((_now() - t).total_seconds())} ago" if t else ""
        return (
            f"{self.role_of(pod)} pod {name_of(pod)}: {len(events)} earlier event(s) ({', '.join(ordered)}); "
            f"the last: {last.get('reason')}{ago} - {event_message(last)}"
        )

    def event_line(self, pod: dict, event: dict) -> str:
        created = parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
        t = event_time(event)
        since = f" (+{duration((t - created).total_seconds())} after the pod was created)" if t and created else ""
        warn = "WARNING " if event.get("type") == "Warning" else ""
        count = f" x{event['count']}" if (event.get("count") or 1) > 1 else ""
        return (
            f"{self.role_of(pod)} pod {name_of(pod)}: {warn}{event.get('reason')}{count}{since}: {event_message(event)}"
        )

    def _heartbeat(self, pods: list[dict], pairs: list[tuple[dict, dict]]) -> None:
        last: dict[str, dict] = {}
        for pod, ev in pairs:
            last[name_of(pod)] = ev
        for pod in pods:
            if pod_ready(pod):
                continue
            ev = last.get(name_of(pod))
            t = event_time(ev) if ev else None
            if ev is None or t is None:
                self.say(f"{self.role_of(pod)} pod {name_of(pod)}: no events yet")
                continue
            doing = "still pulling the image" if ev.get("reason") == "Pulling" else "waiting"
            self.say(
                f"{self.role_of(pod)} pod {name_of(pod)}: {doing} ({duration((_now() - t).total_seconds())} "
                f"since {ev.get('reason')})"
            )


# ============================================================================================
# The Ray Jobs API behind a Ready head
# ============================================================================================


def jobs_api_answers(url: str, timeout_s: float = 5.0) -> str:
    """Empty when the dashboard's HTTP server answers ``GET {url}/api/version``: JSON, or a 4xx such as the 401 of
    Ray token authentication when this process has no token (the server is up). Else why not."""
    req = urllib.request.Request(f"{url}/api/version", headers=auth_headers())
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            json.loads(resp.read() or b"null")
        return ""
    except urllib.error.HTTPError as e:
        return "" if e.code < 500 else f"HTTP {e.code}: {e.reason}"
    except (OSError, ValueError) as e:  # refused, reset, timed out; a non-JSON body
        return f"{type(e).__name__}: {e}"


def wait_for_jobs_api(
    settings: Settings, head: str, *, client=None, timeout_s: float = 180, poll_s: float = 2.0, log=print
) -> tuple[bool, str]:
    """Wait until the Ray Jobs API of the head pod ``head`` answers through a port-forward: (ok, what to show)."""
    ns = settings.kubernetes.namespace
    factory = kube.kube_connection_factory(client, head, ns, DASHBOARD_PORT) if client is not None else None
    t0 = time.monotonic()
    with kube.port_forward(settings, head, DASHBOARD_PORT, connection_factory=factory) as fwd:
        waited = kube.wait_for(
            lambda: ((why := jobs_api_answers(fwd.url)) == "", why), timeout_s=timeout_s, interval_s=poll_s
        )
    if waited.ok:
        log(f"  the Ray Jobs API of {ns}/{head} (port {DASHBOARD_PORT}) answers ({time.monotonic() - t0:.0f} s)")
        return True, f"Ray Jobs API answering on {head}:{DASHBOARD_PORT}"
    return False, (
        f"the head pod {ns}/{head} is Ready but its Ray Jobs API (dashboard, port {DASHBOARD_PORT}) did not answer "
        f"within {timeout_s:g} s: {waited.value}. Fix: read the dashboard's log (`kubectl exec -n {ns} {head} -- "
        f"tail -50 /tmp/ray/session_latest/logs/dashboard.log`), then run this step again"
    )


__all__ = [
    "CRASH_RESTARTS",
    "HEARTBEAT_S",
    "HOPELESS_WAITING",
    "PROGRESS_REASONS",
    "PodProgress",
    "crash_looping",
    "duration",
    "event_message",
    "event_time",
    "jobs_api_answers",
    "parse_time",
    "wait_for_jobs_api",
]
