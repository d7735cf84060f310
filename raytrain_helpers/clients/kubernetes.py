"""The Kubernetes API: client, server-side apply, get/list/delete, wait, port-forward, exec.

Everything goes through the official ``kubernetes`` client, but objects stay plain dicts: requests are
built with :meth:`ApiClient.param_serialize` for a REST path from :data:`KINDS`, so the code needs no
discovery and reads exactly what the API server returns. Streams (exec, port-forward) use
``kubernetes.stream``. What the objects say (labels, quantities, pod state) is read with
:mod:`raytrain_helpers.plan.kube_objects`.

The client comes from a kubeconfig (``KUBECONFIG`` or ``~/.kube/config``): the EKS context written by
``aws eks update-kubeconfig`` / ``eksctl`` is preferred when the settings name a cluster, otherwise the
current context. Tests point ``KUBECONFIG`` at the local stand-in (``tests/fakes/k8s_standin``).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.constants import LOOPBACK
from ..core.settings import Settings

FIELD_MANAGER = "raytrain-tutorial"

#: (apiVersion, kind) -> (plural, namespaced). The kinds this tutorial applies or reads.
KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "Node"): ("nodes", False),
    ("v1", "Pod"): ("pods", True),
    ("v1", "Service"): ("services", True),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "ResourceQuota"): ("resourcequotas", True),
    ("v1", "LimitRange"): ("limitranges", True),
    ("networking.k8s.io/v1", "NetworkPolicy"): ("networkpolicies", True),
    ("v1", "Event"): ("events", True),
    ("apps/v1", "DaemonSet"): ("daemonsets", True),
    ("apps/v1", "Deployment"): ("deployments", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("rbac.authorization.k8s.io/v1", "Role"): ("roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("rolebindings", True),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): ("customresourcedefinitions", False),
    ("ray.io/v1", "RayCluster"): ("rayclusters", True),
    ("ray.io/v1", "RayJob"): ("rayjobs", True),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): ("validatingadmissionpolicies", False),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): (
        "validatingadmissionpolicybindings",
        False,
    ),
}


class K8sError(RuntimeError):
    """A Kubernetes API call failed; ``status`` is the HTTP status (0 = no answer)."""

    def __init__(self, message: str, status: int = 0, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body


# --------------------------------------------------------------------------------------------
# Client
# --------------------------------------------------------------------------------------------


def kubeconfig_path() -> Path:
    env = os.environ.get("KUBECONFIG")
    if env:
        return Path(env.split(os.pathsep)[0]).expanduser()
    return Path("~/.kube/config").expanduser()


def pick_context(settings: Settings | None, kubeconfig: dict[str, Any]) -> str | None:
    """The context to use: the one for ``settings.aws.cluster_name`` if the kubeconfig has it, else current.

    ``aws eks update-kubeconfig`` names the cluster by its ARN (``arn:aws:eks:REGION:ACCT:cluster/NAME``);
    eksctl writes ``NAME.REGION.eksctl.io``.
    """
    current = kubeconfig.get("current-context")
    if settings is None:
        return current
    name, region = settings.aws.cluster_name, settings.aws.region
    wanted = (f":cluster/{name}", f"{name}.{region}.eksctl.io")
    matches = []
    for ctx in kubeconfig.get("contexts") or []:
        cluster = (ctx.get("context") or {}).get("cluster", "")
        if cluster.endswith(wanted[0]) or cluster == wanted[1] or ctx.get("name") == name:
            matches.append(ctx.get("name"))
    if current in matches or not matches:
        return current
    return matches[0]


def cluster_context(settings: Settings, kubeconfig: str | os.PathLike | None = None) -> tuple[str | None, str]:
    """(the kubeconfig context of the settings' EKS cluster or None, a description of what was found).

    Destructive steps use it to make sure they talk to *this* cluster, not to whatever context is current."""
    import yaml

    path = Path(kubeconfig).expanduser() if kubeconfig else kubeconfig_path()
    if not path.is_file():
        return None, f"no kubeconfig at {path}"
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        return None, f"kubeconfig {path} is unreadable ({e})"
    ctx = pick_context(settings, doc)
    name, region = settings.aws.cluster_name, settings.aws.region
    for c in doc.get("contexts") or []:
        cluster = (c.get("context") or {}).get("cluster", "")
        if c.get("name") == ctx and (
            cluster.endswith(f":cluster/{name}") or cluster == f"{name}.{region}.eksctl.io" or ctx == name
        ):
            return ctx, f"context {ctx!r} of {path}"
    return None, (
        f"{path} has no context for EKS cluster {name} in {region} (current context: {doc.get('current-context')!r})"
    )


def api_client(
    settings: Settings | None = None, *, kubeconfig: str | os.PathLike | None = None, context: str | None = None
):
    """A ``kubernetes.client.ApiClient`` from the kubeconfig (KUBECONFIG or ~/.kube/config)."""
    import yaml
    from kubernetes import config as kconfig

    path = Path(kubeconfig).expanduser() if kubeconfig else kubeconfig_path()
    if not path.is_file():
        raise K8sError(
            f"no kubeconfig at {path}. Fix: run notebook 02 (it writes the EKS context), or "
            f"`aws eks update-kubeconfig --name {settings.aws.cluster_name if settings else 'CLUSTER'} "
            f"--region {settings.aws.region if settings else 'REGION'}`, or set KUBECONFIG"
        )
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise K8sError(f"cannot read kubeconfig {path}: {e}") from None
    ctx = context or pick_context(settings, doc)
    try:
        client = kconfig.new_client_from_config(config_file=str(path), context=ctx)
    except Exception as e:  # ConfigException and friends
        raise K8sError(f"kubeconfig {path} (context {ctx!r}) is not usable: {e}") from None
    client.__dict__["_raytrain_context"] = ctx
    client.__dict__["_raytrain_kubeconfig"] = str(path)
    return client


@contextlib.contextmanager
def using_client(settings: Settings, client=None) -> Iterator[Any]:
    """``client`` when the caller holds one, else a new client from the kubeconfig, closed on exit."""
    if client is not None:
        yield client
        return
    own = api_client(settings)
    try:
        yield own
    finally:
        own.close()


def context_of(client) -> str | None:
    """The kubeconfig context :func:`api_client` chose for this client."""
    return client.__dict__.get("_raytrain_context")


def kubeconfig_of(client) -> str | None:
    """The kubeconfig file :func:`api_client` read for this client."""
    return client.__dict__.get("_raytrain_kubeconfig")


# --------------------------------------------------------------------------------------------
# REST
# --------------------------------------------------------------------------------------------


def resource_path(
    api_version: str, kind: str, namespace: str | None = None, name: str | None = None, subresource: str | None = None
) -> str:
    try:
        plural, namespaced = KINDS[(api_version, kind)]
    except KeyError:
        raise K8sError(f"kind {api_version}/{kind} is not known to raytrain_helpers.clients.kubernetes.KINDS") from None
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespaced:
        if not namespace and name is not None:
            raise K8sError(f"{kind} {name} is namespaced: give a namespace")
        if namespace:
            base += f"/namespaces/{namespace}"
    path = f"{base}/{plural}"
    if name is not None:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    return path


def request(
    client,
    method: str,
    path: str,
    *,
    query: list[tuple[str, str]] | None = None,
    body: Any = None,
    content_type: str | None = None,
    timeout: float = 30.0,
    ok_404: bool = False,
) -> Any:
    """One API call; returns the decoded JSON body (None for 404 when ``ok_404``)."""
    headers = {"Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type
    elif body is not None:
        headers["Content-Type"] = "application/json"
    try:
        m, url, hdrs, b, post = client.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = client.call_api(m, url, hdrs, b, post, _request_timeout=timeout)
        resp.read()
    except Exception as e:  # urllib3 connection errors, ApiException
        status = getattr(e, "status", 0) or 0
        raise K8sError(
            f"{method} {path}: no answer from the Kubernetes API ({type(e).__name__}: {e}). Fix: check "
            f"the cluster is up, the kubeconfig context is right and its credentials work (EKS: "
            f"`aws eks get-token`; `kubectl get nodes`)",
            status,
        ) from None
    status = resp.status
    raw = resp.data or b""
    try:
        data = json.loads(raw.decode() or "null")
    except ValueError:
        data = raw.decode(errors="replace")
    if status == 404 and ok_404:
        return None
    if not 200 <= status < 300:
        msg = data.get("message") if isinstance(data, dict) else str(data)[:300]
        hint = {
            401: "the credentials were refused (EKS tokens come from `aws eks get-token`: check AWS "
            "credentials and the kubeconfig user)",
            403: "RBAC forbids it (the IAM identity needs cluster-admin access: EKS access entry)",
            404: "not found (is the CRD / operator installed? notebook 04 installs KubeRay)",
            409: "a conflict (another field manager owns the field; re-run, the apply is forced)",
            422: "the object is invalid",
        }.get(status, "")
        raise K8sError(f"{method} {path} -> HTTP {status}: {msg}" + (f". {hint}" if hint else ""), status, data)
    return data


def get(client, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
    """The object, or None if it does not exist."""
    return request(client, "GET", resource_path(api_version, kind, namespace, name), ok_404=True)


def list_objects(
    client,
    api_version: str,
    kind: str,
    namespace: str | None = None,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
) -> list[dict]:
    """Items of a kind (all namespaces when namespace is None for a namespaced kind). [] if the kind is absent."""
    q = []
    if label_selector:
        q.append(("labelSelector", label_selector))
    if field_selector:
        q.append(("fieldSelector", field_selector))
    data = request(client, "GET", resource_path(api_version, kind, namespace), query=q, ok_404=True)
    return list((data or {}).get("items") or [])


def apply(client, obj: dict, *, field_manager: str = FIELD_MANAGER, force: bool = True, dry_run: bool = False) -> dict:
    """Server-side apply (PATCH application/apply-patch+yaml): create or update, idempotent."""
    md = obj.get("metadata") or {}
    if not md.get("name"):
        raise K8sError(f"cannot apply a {obj.get('kind')} without metadata.name")
    path = resource_path(obj["apiVersion"], obj["kind"], md.get("namespace"), md["name"])
    q = [("fieldManager", field_manager)]
    if force:
        q.append(("force", "true"))
    if dry_run:
        q.append(("dryRun", "All"))
    return request(client, "PATCH", path, query=q, body=obj, content_type="application/apply-patch+yaml")


def delete(
    client, api_version: str, kind: str, name: str, namespace: str | None = None, *, propagation: str = "Foreground"
) -> bool:
    """Delete one object; False if it was not there (idempotent)."""
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
    res = request(client, "DELETE", resource_path(api_version, kind, namespace, name), body=body, ok_404=True)
    return res is not None


def server_version(client) -> dict:
    return request(client, "GET", "/version")


# --------------------------------------------------------------------------------------------
# Waiting
# --------------------------------------------------------------------------------------------


@dataclass
class WaitResult:
    ok: bool
    value: Any
    elapsed_s: float
    polls: int


def wait_for(
    probe: Callable[[], tuple[bool, Any]],
    timeout_s: float,
    *,
    interval_s: float = 5.0,
    on_poll: Callable[[Any, float], None] | None = None,
) -> WaitResult:
    """Poll ``probe() -> (done, value)`` until done or timeout. API errors during polling are retried."""
    t0 = time.monotonic()
    polls = 0
    value: Any = None
    while True:
        polls += 1
        try:
            done, value = probe()
        except K8sError as e:
            done, value = False, e
        elapsed = time.monotonic() - t0
        if on_poll is not None:
            on_poll(value, elapsed)
        if done:
            return WaitResult(True, value, elapsed, polls)
        if elapsed >= timeout_s:
            return WaitResult(False, value, elapsed, polls)
        # quick first polls (a stand-in or an already-converged cluster answers in a second), then interval_s
        step = min(interval_s, 0.5 * 1.5 ** (polls - 1))
        time.sleep(max(0.01, min(step, timeout_s - elapsed)))


# --------------------------------------------------------------------------------------------
# Exec
# --------------------------------------------------------------------------------------------


class ExecError(K8sError):
    def __init__(self, message: str, returncode: int | None, stdout: str, stderr: str):
        super().__init__(message)
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def exec_in_pod(
    settings: Settings,
    pod: str,
    command: list[str] | str,
    *,
    namespace: str | None = None,
    container: str | None = None,
    timeout_s: float = 120.0,
    client=None,
    check: bool = True,
) -> str:
    """Run a command in a pod (the exec subresource over a websocket) and return its stdout.

    ``command`` is an argv list, or a string run with ``/bin/sh -c``. Raises :class:`ExecError` on a
    non-zero exit when ``check`` (stderr and the exit code are in the error).
    """
    from kubernetes import client as kclient
    from kubernetes.stream import stream

    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    ns = namespace or settings.kubernetes.namespace
    own = client is None
    client = client or api_client(settings)
    try:
        core = kclient.CoreV1Api(client)
        kwargs = dict(command=argv, stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
        if container:
            kwargs["container"] = container
        try:
            ws = stream(core.connect_get_namespaced_pod_exec, pod, ns, **kwargs)
        except Exception as e:
            raise K8sError(f"exec in pod {ns}/{pod} failed to start: {e}", getattr(e, "status", 0)) from None
        out, err = [], []
        deadline = time.monotonic() + timeout_s
        try:
            while ws.is_open() and time.monotonic() < deadline:
                ws.update(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
                if ws.peek_stdout():
                    out.append(ws.read_stdout())
                if ws.peek_stderr():
                    err.append(ws.read_stderr())
            timed_out = ws.is_open()
            if timed_out:
                ws.close()
            else:
                out.append(ws.read_stdout() or "")
                err.append(ws.read_stderr() or "")
            rc = None if timed_out else ws.returncode
        finally:
            with contextlib.suppress(Exception):
                ws.close()
    finally:
        if own:
            client.close()
    stdout, stderr = "".join(out), "".join(err)
    if timed_out:
        raise ExecError(f"exec {argv!r} in {ns}/{pod} did not finish within {timeout_s:g} s", None, stdout, stderr)
    if check and rc != 0:
        raise ExecError(f"exec {argv!r} in {ns}/{pod} exited {rc}: {stderr.strip()[-500:]}", rc, stdout, stderr)
    return stdout


# --------------------------------------------------------------------------------------------
# Port-forward
# --------------------------------------------------------------------------------------------

#: A connection factory opens one upstream byte stream to the pod's port and returns
#: (socket-like object with fileno/recv/sendall/close, closer callable).
ConnectionFactory = Callable[[], tuple[Any, Callable[[], None]]]


def kube_connection_factory(client, pod: str, namespace: str, port: int) -> ConnectionFactory:
    """Upstream connections through the API server's pods/portforward (one websocket per connection)."""
    from kubernetes import client as kclient
    from kubernetes.stream import portforward

    core = kclient.CoreV1Api(client)
    lock = threading.Lock()  # kubernetes.stream swaps ApiClient.call_api while it builds the request

    def connect():
        with lock:
            pf = portforward(core.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(port))
        sock = pf.socket(port)
        sock.setblocking(True)

        def close():
            with contextlib.suppress(Exception):
                pf.close()

        err = pf.error(port)
        if err:
            close()
            raise K8sError(f"port-forward to {namespace}/{pod}:{port} failed: {err}")
        return sock, close

    return connect


class PortForwarder:
    """A local TCP listener on 127.0.0.1 whose connections are relayed to an upstream factory."""

    def __init__(self, factory: ConnectionFactory, *, host: str = LOOPBACK, port: int = 0):
        if host not in (LOOPBACK, "localhost", "::1"):
            raise ValueError("the port-forward listens on the loopback interface only")
        self._factory = factory
        self._srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._srv.bind((LOOPBACK, port))
        self._srv.listen(16)
        self.port = self._srv.getsockname()[1]
        self.url = f"http://{LOOPBACK}:{self.port}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []
        self.connections = 0
        self._accept_thread = threading.Thread(target=self._accept_loop, name=f"pf-accept-{self.port}", daemon=True)
        self._accept_thread.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                r, _, _ = select.select([self._srv], [], [], 0.2)
            except (OSError, ValueError):
                return
            if not r:
                continue
            try:
                conn, _ = self._srv.accept()
            except OSError:
                return
            self.connections += 1
            t = threading.Thread(target=self._relay, args=(conn,), name=f"pf-relay-{self.port}", daemon=True)
            self._threads.append(t)
            t.start()

    def _relay(self, local: socket.socket) -> None:
        try:
            upstream, closer = self._factory()
        except Exception as e:  # report to the caller through .errors, close the client connection
            self.errors.append(str(e))
            local.close()
            return
        try:
            socks = [local, upstream]
            while not self._stop.is_set():
                r, _, _ = select.select(socks, [], [], 0.2)
                done = False
                for s in r:
                    try:
                        data = s.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        done = True
                        break
                    (upstream if s is local else local).sendall(data)
                if done:
                    break
        except OSError as e:
            self.errors.append(str(e))
        finally:
            with contextlib.suppress(OSError):
                local.close()
            closer()

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._srv.close()
        self._accept_thread.join(timeout=2)
        for t in self._threads:
            t.join(timeout=2)


@contextlib.contextmanager
def port_forward(
    settings: Settings,
    pod: str,
    remote_port: int,
    *,
    namespace: str | None = None,
    local_port: int = 0,
    connection_factory: ConnectionFactory | None = None,
) -> Iterator[PortForwarder]:
    """Forward 127.0.0.1:<free port> to ``pod:remote_port`` through the Kubernetes API; closes on exit."""
    client = None
    if connection_factory is None:
        client = api_client(settings)  # a client of its own: kubernetes.stream patches it while connecting
        connection_factory = kube_connection_factory(
            client, pod, namespace or settings.kubernetes.namespace, remote_port
        )
    fwd = PortForwarder(connection_factory, port=local_port)
    try:
        yield fwd
    finally:
        fwd.close()
        if client is not None:
            client.close()


__all__ = [
    "FIELD_MANAGER",
    "KINDS",
    "ConnectionFactory",
    "ExecError",
    "K8sError",
    "PortForwarder",
    "WaitResult",
    "api_client",
    "apply",
    "cluster_context",
    "context_of",
    "delete",
    "exec_in_pod",
    "get",
    "kube_connection_factory",
    "kubeconfig_of",
    "kubeconfig_path",
    "list_objects",
    "pick_context",
    "port_forward",
    "request",
    "resource_path",
    "server_version",
    "using_client",
    "wait_for",
]
