"""The RayCluster's Ready wait shows the pods' events, and a re-run continues where the last one stopped.

Against the Kubernetes API stand-in, which records core/v1 Events as the scheduler and the kubelet do
(Scheduled, Pulling, Pulled, Created, Started, with ``involvedObject``, ``firstTimestamp``/``lastTimestamp``,
``count``) and keeps a pod Pending/ContainerCreating for ``pull_s`` while its image is pulled. The real kubelet
reports the same reasons; that the pull takes about 30 min for the DLC is the real cluster's part.
"""

from __future__ import annotations

import http.server
import re
import socket
import threading
from pathlib import Path

import pytest

from raytrain_helpers.clients import kubernetes as kube
from raytrain_helpers.core import config
from raytrain_helpers.targets.aws.kuberay import podwait
from raytrain_helpers.targets.aws.kuberay import raycluster as kuberay
from tests.fakes.k8s_standin import standin

REPO = Path(__file__).resolve().parents[5]
#: GPUs/EFA allocatable and the KubeRay operator running (notebooks 02-03 done); pulling the image takes pull_s.
PULLING = dict(plugins_installed=True, operator_installed=True, delay_s=0.1)
STEPS = ("Scheduled", "Pulling", "Pulled", "Created", "Started")


def settings(**params):
    return config.load(REPO / "env.yaml", environ={}, check_installed_ray=False, target="aws", **params)


@pytest.fixture(autouse=True)
def _no_helm(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


def event_lines(lines: list[str], pod: str) -> list[str]:
    """The reasons of the one-event lines about ``pod``, in the order shown."""
    out = []
    for line in lines:
        m = re.search(rf" pod {re.escape(pod)}: (?:WARNING )?(\w+)(?: x\d+)? \(\+", line)
        if m:
            out.append(m.group(1))
    return out


def uids(st) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in st.objects("v1", "pods", "ray-train")}


def test_the_wait_shows_each_pod_event_once_from_pending_to_ready():
    s = settings()
    lines: list[str] = []
    with standin("healthy", set_env=True, pull_s=1.0, **PULLING) as st:
        r = kuberay.raycluster(s, timeout_s=20, poll_s=0.05, log=lines.append)
        assert r.ok, (r.message, r.diagnosis)
        pods = sorted(uids(st))
    assert len(pods) == 3
    for pod in pods:
        assert event_lines(lines, pod) == list(STEPS), (pod, lines)  # once each, in the pod's order
    pulled = [line for line in lines if ": Pulled (" in line]
    assert len(pulled) == 3 and all("(9.9 GB)" in line for line in pulled)
    # the pods' states around the events: not ready while pulling, Ready only after every Started
    first_pulling = next(i for i, line in enumerate(lines) if ": Pulling (" in line)
    not_ready = next(i for i, line in enumerate(lines) if "head not ready, workers Running 0/2" in line)
    ready = next(i for i, line in enumerate(lines) if "head Ready, workers Running 2/2" in line)
    last_started = max(i for i, line in enumerate(lines) if ": Started (" in line)
    assert not_ready < ready and first_pulling < ready and last_started < ready


def test_a_rerun_waits_on_the_same_pods_and_summarises_what_was_shown():
    """The first run stops mid-pull (its time budget); the second recreates nothing, says in one line per pod what
    happened before it began, and shows only the new events; a third, on a ready cluster, shows nothing new."""
    s = settings()
    first: list[str] = []
    second: list[str] = []
    third: list[str] = []
    with standin("healthy", set_env=True, pull_s=3.0, **PULLING) as st:
        r1 = kuberay.raycluster(s, timeout_s=1.0, poll_s=0.05, log=first.append)
        assert not r1.ok and "run again: it waits on the same pods" in r1.message
        before = uids(st)
        rc = st.get("ray.io/v1", "rayclusters", "raytrain", "ray-train")
        gen, rc_uid = rc["metadata"]["generation"], rc["metadata"]["uid"]
        r2 = kuberay.raycluster(s, timeout_s=20, poll_s=0.05, log=second.append)
        assert r2.ok, (r2.message, r2.diagnosis)
        assert uids(st) == before  # the same pods: nothing deleted, nothing recreated
        rc = st.get("ray.io/v1", "rayclusters", "raytrain", "ray-train")
        assert (rc["metadata"]["generation"], rc["metadata"]["uid"]) == (gen, rc_uid)
        r3 = kuberay.raycluster(s, timeout_s=20, poll_s=0.05, log=third.append)
        assert r3.ok and uids(st) == before
    assert not any("deleting" in line for line in second + third)
    for pod in before:
        assert event_lines(first, pod) == ["Scheduled", "Pulling"]
        assert event_lines(second, pod) == ["Pulled", "Created", "Started"]  # only what is new
        summary = [line for line in second if f"pod {pod}: 2 earlier event(s) (Scheduled, Pulling)" in line]
        assert len(summary) == 1 and "the last: Pulling" in summary[0]
        assert event_lines(third, pod) == []
        assert [line for line in third if f"pod {pod}: 5 earlier event(s) ({', '.join(STEPS)})" in line]


def test_a_long_pull_says_it_is_still_pulling():
    s = settings()
    with standin("healthy", set_env=True, pull_s=30.0, **PULLING) as st:
        client = kube.api_client(s)
        try:
            assert not kuberay.raycluster(s, timeout_s=0.6, poll_s=0.05, client=client, log=lambda *a: None).ok
            lines: list[str] = []
            progress = podwait.PodProgress(client, "ray-train", lines.append, kuberay.pod_role, lambda: 0.0)
            progress.heartbeat_s = 0.0
            pods = kuberay.cluster_pods(client, s)
            progress.remember(pods)
            assert progress.update(pods) and all("earlier event(s)" in line for line in lines)
            beat = progress.update(pods)  # nothing new: one line per pod that is not Ready
        finally:
            client.close()
        assert len(st.objects("v1", "pods", "ray-train")) == 3
    assert len(beat) == 3 and all("still pulling the image" in line and "since Pulling" in line for line in beat)


def test_unreadable_events_are_said_once_and_the_wait_goes_on(monkeypatch):
    def forbidden(*a, **k):
        raise kube.K8sError("GET /api/v1/namespaces/ray-train/events -> HTTP 403: forbidden", 403)

    lines: list[str] = []
    progress = podwait.PodProgress(None, "ray-train", lines.append, lambda p: "head", lambda: 1.0)
    monkeypatch.setattr(kube, "list_objects", forbidden)
    assert len(progress.update([])) == 1 and "pod events unreadable" in lines[0] and "HTTP 403" in lines[0]
    assert progress.update([]) == []


@pytest.mark.parametrize(
    ("event", "when"),
    [
        ({"lastTimestamp": "2026-12-04T16:00:05Z", "firstTimestamp": "2026-12-04T16:00:00Z"}, "16:00:05"),
        ({"eventTime": "2026-12-04T16:00:07.123456Z"}, "16:00:07"),
        ({"firstTimestamp": "2026-12-04T16:00:01Z"}, "16:00:01"),
        ({}, None),
    ],
)
def test_event_time_reads_the_core_v1_fields(event, when):
    t = podwait.event_time(event)
    assert (t.strftime("%H:%M:%S") if t else None) == when


def test_durations_and_messages():
    assert [podwait.duration(x) for x in (5, 252, 3720)] == ["5s", "4m12s", "1h02m"]
    msg = podwait.event_message({"message": 'Successfully pulled image "x"  in 4m2s. Image size: 12500000000 bytes.'})
    assert msg.endswith("Image size: 12500000000 bytes (12.5 GB).") and "  " not in msg


def test_an_operator_that_would_probe_with_wget_is_refused_before_anything_is_applied():
    s = settings(kuberay_version="1.4.0")
    with standin("healthy", set_env=True, **PULLING) as st:
        r = kuberay.raycluster(s, timeout_s=5, poll_s=0.05, log=lambda *a: None)
        assert not r.ok and "nothing was applied" in r.message
        assert any("KUBERAY_VERSION" in p and "wget" in p for p in r.problems)
        assert st.objects("ray.io/v1", "rayclusters", "ray-train") == []


def _head_and_jobs_api(s, st_opts: dict, timeout_s: float) -> tuple[bool, str, list[str]]:
    lines: list[str] = []
    with standin("healthy", set_env=True, **PULLING, **st_opts):
        client = kube.api_client(s)
        try:
            assert kuberay.raycluster(s, timeout_s=20, poll_s=0.05, client=client, log=lambda *a: None).ok
            head = kuberay.head_pod(s, client)["metadata"]["name"]
            ok, said = podwait.wait_for_jobs_api(
                s, head, client=client, timeout_s=timeout_s, poll_s=0.1, log=lines.append
            )
        finally:
            client.close()
    return ok, said, lines


def test_a_ready_head_is_not_enough_the_jobs_api_must_answer():
    """The stand-in's head relays 8265 to a dashboard answering /api/version: the wait says so."""
    s = settings()
    ok, said, lines = _head_and_jobs_api(s, {}, timeout_s=10)
    assert ok and "Ray Jobs API answering" in said and "answers" in lines[0]


def test_a_jobs_api_that_does_not_answer_is_named_with_the_fix():
    """The head is Ready (HTTP probe on 52365) but nothing listens behind its 8265: not ok, the port and the fix."""
    s = settings()
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    ok, said, _ = _head_and_jobs_api(s, {"dashboard_upstream": f"127.0.0.1:{closed}"}, timeout_s=1.0)
    assert not ok and "Ray Jobs API (dashboard, port 8265) did not answer" in said and "Fix:" in said


@pytest.mark.parametrize(("status", "up"), [(200, True), (401, True), (404, True), (500, False), (503, False)])
def test_any_answer_below_500_means_the_dashboard_is_up(status, up):
    """A 401 is what a dashboard with Ray token authentication answers a caller without the token: it is up."""

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b'{"version": "4"}'
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer) as srv:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        why = podwait.jobs_api_answers(f"http://127.0.0.1:{srv.server_address[1]}")
        srv.shutdown()
    assert (why == "") is up and (up or f"HTTP {status}" in why)
