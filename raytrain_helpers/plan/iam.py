"""The run's checkpoint storage and the pods' identity, computed: where the checkpoints go (bucket and prefix),
the storage role's name, its trust and permission policies (rendered from ``manifests/iam-*.json.j2``), the
ServiceAccount that carries it, and a least-privilege check of any policy document.

Pure: nothing here talks to AWS or Kubernetes; ``targets.aws.storage.bucket`` creates what is computed here.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from ..core.s3_uri import parse_s3_uri
from ..core.settings import Settings
from ..core.validation import ConfigError
from . import iam_eval, s3_access
from .render import render_objects, render_template

#: The prefix under the bucket when ``train.storage_path`` does not name one.
DEFAULT_PREFIX = "raytrain"
#: The name of the storage role's inline permission policy.
POLICY_NAME = "raytrain-storage"
#: The only actions the storage role may hold (ListBucket on the bucket, the others on the prefix's objects and,
#: PutObject only, on the folder markers above the prefix).
LIST_ACTIONS = ("s3:ListBucket",)
OBJECT_ACTIONS = ("s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload")
#: The EKS add-on that makes Pod Identity work (installed by step 02's ClusterConfig).
POD_IDENTITY_ADDON = "eks-pod-identity-agent"
#: The Sid of the bucket policy's statement that refuses requests without TLS.
TLS_ONLY_SID = "RaytrainDenyRequestsWithoutTLS"
MODES = ("pod-identity", "irsa")
#: The session tag EKS Pod Identity attaches with the pod's namespace, and the policy variable that reads it
#: (Amazon EKS User Guide, "Grant Pods access to AWS resources based on tags", list of session tags added by EKS
#: Pod Identity: eks-cluster-arn, eks-cluster-name, kubernetes-namespace, kubernetes-service-account,
#: kubernetes-pod-name, kubernetes-pod-uid, "use ${aws:PrincipalTag/ followed by the key";
#: awsdocs/amazon-eks-user-guide commit 4d52b4d, latest/ug/manage-access/aws-access/service-accounts.adoc).
NAMESPACE_TAG = "kubernetes-namespace"
NAMESPACE_VARIABLE = "${aws:PrincipalTag/" + NAMESPACE_TAG + "}"
_ROLE_MAX = 64
#: A '/' between folder levels: not one inside a policy variable's ``${...}``.
_LEVEL_SEPARATOR = re.compile(r"/(?![^${}]*\})")
#: A policy variable that is not closed (``${aws:PrincipalTag/``): IAM cannot resolve it.
_OPEN_VARIABLE = re.compile(r"\$\{[^}]*$|\$\{[^}]*\$\{")


@dataclass(frozen=True)
class StorageLocation:
    """Where the run's checkpoints go: ``s3://bucket/prefix``; ``derived``: the bucket name was computed."""

    bucket: str
    prefix: str
    derived: bool = False

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def bucket_arn(self) -> str:
        return f"arn:aws:s3:::{self.bucket}"

    @property
    def objects_arn(self) -> str:
        return f"arn:aws:s3:::{self.bucket}/{self.prefix}/*"

    @property
    def parents(self) -> list[str]:
        """The folders above the prefix (``a/b/c`` -> ``a``, ``a/b``): pyarrow's ``create_dir`` writes a marker
        object ``folder/`` for each. A policy variable is one level, whatever its key holds
        (``a/${aws:PrincipalTag/kubernetes-namespace}`` -> ``a``): the folders are those of the substituted prefix."""
        parts = _LEVEL_SEPARATOR.split(self.prefix)
        return ["/".join(parts[:i]) for i in range(1, len(parts))]

    @property
    def marker_arns(self) -> list[str]:
        return [f"arn:aws:s3:::{self.bucket}/{p}/" for p in self.parents]


def storage_bucket_and_prefix(uri: str) -> tuple[str, str]:
    """``train.storage_path``'s bucket and prefix (:func:`~raytrain_helpers.core.s3_uri.parse_s3_uri`); ConfigError
    naming the setting otherwise."""
    try:
        return parse_s3_uri(uri)
    except ValueError as e:
        raise ConfigError(f"train.storage_path = {uri!r}: {e}") from None


def derived_bucket_name(cluster_name: str, account: str, region: str) -> str:
    """``<cluster>-<account>-<region>``, lower-case, the cluster part cut so that the name stays within 63."""
    tail = f"-{account}-{region}"
    head = re.sub(r"[^a-z0-9-]", "-", cluster_name.lower())[: 63 - len(tail)].strip("-") or "raytrain"
    return head + tail


def storage_location(settings: Settings, account: str) -> StorageLocation:
    """The run's storage: the bucket of ``aws.storage_bucket``, else of ``train.storage_path``, else derived;
    the prefix of ``train.storage_path``, else :data:`DEFAULT_PREFIX`."""
    a, path = settings.aws, settings.train.storage_path
    bucket, prefix = storage_bucket_and_prefix(path) if path.startswith("s3://") else ("", "")
    if path and not path.startswith("s3://"):
        raise ConfigError(
            f"train.storage_path = {path!r} is not reachable from the worker pods on aws. Fix: s3://BUCKET/PREFIX, "
            f"or leave it empty (step 02 creates a bucket)"
        )
    if a.storage_bucket and bucket and a.storage_bucket != bucket:
        raise ConfigError(
            f"aws.storage_bucket = {a.storage_bucket!r} but train.storage_path names bucket {bucket!r}. Fix: "
            f"make them the same, or leave one empty"
        )
    name = a.storage_bucket or bucket
    prefix = prefix or DEFAULT_PREFIX
    if a.storage_per_namespace:
        prefix = f"{prefix}/{settings.kubernetes.namespace}"
    return StorageLocation(
        bucket=name or derived_bucket_name(a.cluster_name, account, a.region), prefix=prefix, derived=not name
    )


def policy_location(settings: Settings, loc: StorageLocation) -> StorageLocation:
    """The storage as the role's permission policy names it: ``loc`` itself, or with ``aws.storage_per_namespace``
    the namespace's part of the prefix written as :data:`NAMESPACE_VARIABLE` (one role for every namespace, each
    pod's session reaching only its own namespace's objects)."""
    if not settings.aws.storage_per_namespace:
        return loc
    ns = settings.kubernetes.namespace
    base = loc.prefix[: -len(ns) - 1] if loc.prefix.endswith("/" + ns) else loc.prefix
    return StorageLocation(loc.bucket, f"{base}/{NAMESPACE_VARIABLE}", loc.derived)


def principal_tags(settings: Settings) -> dict[str, str]:
    """The session tags the policy reads for these settings' pods (EKS Pod Identity attaches the namespace)."""
    return {NAMESPACE_TAG: settings.kubernetes.namespace} if settings.aws.storage_per_namespace else {}


def role_name(settings: Settings) -> str:
    """The storage role: ``<cluster>-<namespace>-<service account>-s3``, at most 64 characters (hashed when
    longer, so two clusters never share one)."""
    a, k = settings.aws, settings.kubernetes
    name = f"{a.cluster_name}-{k.namespace}-{k.service_account}-s3"
    if len(name) <= _ROLE_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: _ROLE_MAX - 9].rstrip('-')}-{digest}"


def _json(template: str, settings: Settings, **values: Any) -> dict[str, Any]:
    return json.loads(render_template(template, settings, **values))


def permission_policy(settings: Settings, loc: StorageLocation) -> dict[str, Any]:
    """The storage role's inline policy (``manifests/iam-storage-policy.json.j2``) for the run's storage ``loc``,
    written for every namespace under ``aws.storage_per_namespace`` (:func:`policy_location`)."""
    loc = policy_location(settings, loc)
    return _json("iam-storage-policy.json.j2", settings, bucket=loc.bucket, prefix=loc.prefix, parents=loc.parents)


# The tag keys EKS Pod Identity adds to its AssumeRole request, and so the only request keys its trust policy may
# condition on (Amazon EKS User Guide, pod-id-abac.html, "List of session tags added by EKS Pod Identity";
# pod-id-role.html, "Setting Conditions"; read 2026-12-06). No page names another key (aws:SourceAccount, ...).
POD_IDENTITY_SESSION_TAGS = (
    "eks-cluster-arn",
    "eks-cluster-name",
    "kubernetes-namespace",
    "kubernetes-service-account",
    "kubernetes-pod-name",
    "kubernetes-pod-uid",
)


def trust_policy(settings: Settings, mode: str, account: str, oidc_issuer: str = "") -> dict[str, Any]:
    """Who may assume the storage role: EKS Pod Identity, or (``irsa``) this service account's OIDC tokens."""
    if mode == "pod-identity":
        a, k = settings.aws, settings.kubernetes
        return _json(
            "iam-trust-pod-identity.json.j2",
            settings,
            cluster_arn=f"arn:aws:eks:{a.region}:{account}:cluster/{a.cluster_name}",
            namespace="" if a.storage_per_namespace else k.namespace,
            service_account=k.service_account,
        )
    if mode != "irsa":
        raise ValueError(f"mode must be one of {MODES}")
    issuer = re.sub(r"^https://", "", oidc_issuer or "")
    if not issuer:
        raise ConfigError(
            f"aws.pod_identity = irsa but cluster {settings.aws.cluster_name} has no OIDC issuer. Fix: "
            f"`eksctl utils associate-iam-oidc-provider --cluster {settings.aws.cluster_name} --approve`, or "
            f"pod_identity: pod-identity"
        )
    k = settings.kubernetes
    return _json(
        "iam-trust-irsa.json.j2",
        settings,
        account=account,
        issuer=issuer,
        namespace=k.namespace,
        service_account=k.service_account,
    )


def bucket_policy(settings: Settings, bucket: str) -> dict[str, Any]:
    """The bucket policy the tutorial puts on a bucket it created: requests without TLS denied
    (``manifests/iam-bucket-policy.json.j2``; its one statement's Sid is :data:`TLS_ONLY_SID`)."""
    return _json("iam-bucket-policy.json.j2", settings, bucket=bucket, sid=TLS_ONLY_SID)


def with_bucket_policy(settings: Settings, existing: dict[str, Any] | None, bucket: str) -> dict[str, Any] | None:
    """``existing`` (a bucket's policy, or None) with the statement of :func:`bucket_policy` in it, its other
    statements kept as they are; None when it holds that statement already."""
    (ours,) = bucket_policy(settings, bucket)["Statement"]
    current = _as_list((existing or {}).get("Statement") or [])
    if ours in current:
        return None
    others = [st for st in current if st.get("Sid") != TLS_ONLY_SID]
    return {"Version": (existing or {}).get("Version", "2012-10-17"), "Statement": [*others, ours]}


def render_service_account(settings: Settings, irsa_role_arn: str = "") -> dict[str, Any]:
    """The pods' ServiceAccount; ``irsa_role_arn``: the IRSA annotation (empty under Pod Identity)."""
    (obj,) = render_objects("serviceaccount.yaml.j2", settings, irsa_role_arn=irsa_role_arn)
    return obj


def policies_text(settings: Settings, account: str = "ACCOUNT", oidc_issuer: str = "") -> str:
    """The storage role's policies as step 02 renders them, for reading before anything exists: the account id
    (and, for IRSA, the cluster's OIDC issuer) shown as placeholders unless given."""
    path = settings.train.storage_path
    if path and not path.startswith("s3://"):  # a local target's folder: show what aws would derive
        settings = settings.model_copy(update={"train": settings.train.model_copy(update={"storage_path": ""})})
    loc = storage_location(settings, account)
    mode = "irsa" if settings.aws.pod_identity == "irsa" else "pod-identity"
    issuer = oidc_issuer or "oidc.eks.REGION.amazonaws.com/id/CLUSTER-ID"
    parts = [
        f"# checkpoint storage: {loc.uri}"
        + (" (bucket name derived from cluster, account and region)" if loc.derived else ""),
        f"# storage role {role_name(settings)}: trust policy ({mode}; manifests/iam-trust-{mode}.json.j2)",
        json.dumps(trust_policy(settings, mode, account, issuer), indent=2),
        f"# storage role {role_name(settings)}: permission policy (manifests/iam-storage-policy.json.j2)",
        json.dumps(permission_policy(settings, loc), indent=2),
    ]
    return "\n".join(parts)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def policy_problems(doc: dict[str, Any], loc: StorageLocation, tags: dict[str, str] | None = None) -> list[str]:
    """Everything wrong with a permission policy for ``loc`` ([] = none): beyond least privilege (a wildcard or
    an action outside the allowed ones, a resource outside the bucket/prefix, NotAction/NotResource), or short of
    what the job's storage layer sends (:func:`uncovered`: a recorded request the policy would deny). ``loc`` as
    the policy names it (:func:`policy_location`); ``tags``: the principal's tags its variables read."""
    problems: list[str] = []
    granted: set[str] = set()
    for i, st in enumerate(_as_list(doc.get("Statement") or [])):
        where = f"statement {st.get('Sid') or i}"
        for key in ("NotAction", "NotResource", "NotPrincipal"):
            if key in st:
                problems.append(f"{where}: {key} grants everything else")
        if st.get("Effect") != "Allow":
            continue
        resources = [str(x) for x in _as_list(st.get("Resource") or [])]
        malformed = [r for r in resources if _OPEN_VARIABLE.search(r)]
        problems += [f"{where}: resource {r!r} holds a policy variable that is not closed" for r in malformed]
        for action in (str(x) for x in _as_list(st.get("Action") or [])):
            if "*" in action or "?" in action:
                problems.append(f"{where}: wildcard action {action!r}")
                continue
            allowed = _allowed_resources(action, loc)
            if allowed is None:
                problems.append(f"{where}: action {action!r} is not needed for checkpoints")
                continue
            problems += [
                f"{where}: {action} on {r!r}, outside {' '.join(allowed)}" for r in resources if r not in allowed
            ]
            granted.add(action)
    missing = [a for a in (*LIST_ACTIONS, *OBJECT_ACTIONS) if a not in granted]
    if missing:
        problems.append(f"missing {', '.join(missing)} (the job needs them on {loc.uri})")
    return problems + uncovered(doc, loc, tags)


def _allowed_resources(action: str, loc: StorageLocation) -> list[str] | None:
    if action in LIST_ACTIONS:
        return [loc.bucket_arn]
    if action == "s3:PutObject":
        return [loc.objects_arn, *loc.marker_arns]
    return [loc.objects_arn] if action in OBJECT_ACTIONS else None


def uncovered(doc: dict[str, Any], loc: StorageLocation, tags: dict[str, str] | None = None) -> list[str]:
    """The requests of :data:`raytrain_helpers.plan.s3_access.STORAGE_REQUESTS` (what pyarrow sends for Ray
    Train's storage calls on ``loc``) that ``doc`` would not allow, each with the action, resource and condition
    keys IAM evaluates (:mod:`raytrain_helpers.plan.iam_eval`). A ``loc`` written with policy variables is the
    storage of a principal with ``tags`` (``aws:PrincipalTag/<key>`` in every request's context)."""
    out: list[str] = []
    principal = {f"aws:PrincipalTag/{k}": v for k, v in (tags or {}).items()}
    prefix = loc.prefix
    for m in reversed(list(iam_eval.VARIABLE.finditer(prefix))):
        value = iam_eval.resolve_variable(m.group(1), {k.lower(): v for k, v in principal.items()})
        prefix = prefix[: m.start()] + value + prefix[m.end() :]
    for req in s3_access.storage_requests(loc.bucket, prefix):
        for auth in s3_access.authorizations(req):
            verdict = iam_eval.decide(doc, auth.action, auth.resource, {**dict(auth.context), **principal})
            if verdict != iam_eval.ALLOW:
                keys = ", ".join(f"{k}={v!r}" for k, v in auth.context) or "no condition keys"
                line = (
                    f"{req.operation} {req.method} /{req.bucket}/{req.key} ({keys}) needs {auth.action} on "
                    f"{auth.resource}: {verdict}"
                )
                if line not in out:
                    out.append(line)
    return out


__all__ = [
    "DEFAULT_PREFIX",
    "TLS_ONLY_SID",
    "bucket_policy",
    "with_bucket_policy",
    "LIST_ACTIONS",
    "MODES",
    "NAMESPACE_TAG",
    "NAMESPACE_VARIABLE",
    "OBJECT_ACTIONS",
    "POD_IDENTITY_ADDON",
    "POD_IDENTITY_SESSION_TAGS",
    "POLICY_NAME",
    "StorageLocation",
    "derived_bucket_name",
    "storage_bucket_and_prefix",
    "permission_policy",
    "policies_text",
    "policy_location",
    "policy_problems",
    "principal_tags",
    "render_service_account",
    "role_name",
    "storage_location",
    "trust_policy",
    "uncovered",
]
