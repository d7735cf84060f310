"""The training workers' own log files on the ``aws`` target, read inside the worker pods."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ....clients import kubernetes as kube
from ....core.constants import MARKER_PREFIX
from ....core.settings import Settings
from ....nccl import WORKER_FILE, check_marker, select_run, sibling_log
from ..kuberay.raycluster import worker_pods


def worker_logs(settings: Settings, marker: str) -> dict[str, str]:
    """The worker log files of the job with ``marker``, read by exec in every running worker pod, by
    ``"<pod>:<path>"`` (NCCL prints there, not on the driver)."""
    client = kube.api_client(settings)  # one client for the listing and every exec
    try:
        pods = worker_pods(settings, client=client)
        return collect_pod_logs(lambda pod, cmd: kube.exec_in_pod(settings, pod, cmd, client=client), pods, marker)
    finally:
        client.close()


#: ``sh -c LIST_SCRIPT raytrain-collect NEEDLE GLOB``: one line per file of GLOB, ``M<TAB>path`` when it holds
#: NEEDLE, else ``F<TAB>path``.
LIST_SCRIPT = (
    'for f in $2; do [ -f "$f" ] || continue; '
    'if grep -qF -e "$1" "$f" 2>/dev/null; then printf "M\\t%s\\n" "$f"; '
    'else printf "F\\t%s\\n" "$f"; fi; done; true'
)

ExecFn = Callable[[str, list[str]], str]


def collect_pod_logs(
    exec_fn: ExecFn, pods: Sequence[str], marker: str, log_glob: str = "/tmp/ray/session_latest/logs/worker-*"
) -> dict[str, str]:
    """One run's Ray worker logs read inside each pod (a pod's stdout does not carry the workers' lines).

    ``exec_fn(pod_name, command_list) -> stdout`` runs a command in the pod (the Kubernetes exec stream is
    supplied by the caller). One listing per pod finds the worker files holding ``[raytrain] marker=<marker>``,
    then each kept file (and its .out/.err sibling) is read with ``cat``. Returns ``{"<pod>:<path>": text}``."""
    marker = check_marker(marker)
    if not callable(exec_fn):
        raise TypeError("exec_fn: expected a callable exec_fn(pod_name, command_list) -> str")
    if isinstance(pods, str):
        pods = [pods]
    out: dict[str, str] = {}
    for pod in pods:
        matched, others = _list_worker_files(exec_fn, pod, MARKER_PREFIX + marker, log_glob)
        texts = {path: _cat(exec_fn, pod, path) for path in matched}
        kept = select_run(texts, marker)
        for path in list(kept):
            d, _, name = path.rpartition("/")
            sib = sibling_log(name)
            sp = f"{d}/{sib}" if sib else None
            if sp and sp in others:
                kept[sp] = _cat(exec_fn, pod, sp)
        for path in sorted(kept):
            out[f"{pod}:{path}"] = kept[path]
    return out


def _list_worker_files(exec_fn: ExecFn, pod: str, needle: str, log_glob: str) -> tuple[list[str], set[str]]:
    """The pod's worker files that hold ``needle``, and the other worker files."""
    try:
        listing = exec_fn(pod, ["sh", "-c", LIST_SCRIPT, "raytrain-collect", needle, log_glob]) or ""
    except Exception as e:
        raise RuntimeError(
            f"pod {pod}: listing {log_glob} failed: {e}. Fix: check the pod is Running and "
            f"the exec permission (pods/exec) of your kubeconfig"
        ) from e
    matched: list[str] = []
    others: set[str] = set()
    for ln in listing.splitlines():
        tag, _, path = ln.partition("\t")
        path = path.strip()
        if not path or not WORKER_FILE.match(path.rsplit("/", 1)[-1]):
            continue
        if tag == "M":
            matched.append(path)
        else:
            others.add(path)
    return matched, others


def _cat(exec_fn: ExecFn, pod: str, path: str) -> str:
    try:
        text = exec_fn(pod, ["cat", "--", path])
    except Exception as e:
        raise RuntimeError(f"pod {pod}: reading {path} failed: {e}") from e
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return text or ""
