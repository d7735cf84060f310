"""A workshop attendee's EKS access entry: created by ``handout namespaces`` from the hand-out's record, read by
``handout status``, and deleted by ``handout teardown``, only while it is the very entry the record asks for.

EKS API (botocore 1.43.11's ``eks`` model): ``CreateAccessEntry`` (clusterName, principalArn, kubernetesGroups,
type, tags; ``ResourceInUseException`` when the principal has an entry already: one per principal and cluster),
``DescribeAccessEntry`` and ``DeleteAccessEntry`` (clusterName, principalArn; ``ResourceNotFoundException``).
An entry is the hand-out's when its tags are all the recorded ones (cluster, attendee and the hand-out's id) and
its groups are the recorded group; any other entry of that principal is reported and left alone.
"""

from __future__ import annotations

from typing import Any

from ....clients import aws as aws_client
from ....core.settings import Settings

ACTIONS = ("create", "status", "remove")


def attendee_access(
    settings: Settings, action: str = "status", *, request: dict[str, Any] | None = None, sess=None
) -> tuple[bool | None, str]:
    """``create`` the access entry of the record's ``request``, say whether it is there (``status``), or
    ``remove`` it; (done, what happened). No request (no principal_arn in the roster): nothing to do."""
    from botocore.exceptions import BotoCoreError, ClientError

    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}")
    if not request:
        return (None, "-") if action == "status" else (True, "no principal_arn in the roster: no access entry")
    cluster, principal = request["clusterName"], request["principalArn"]
    what = f"access entry {principal}"
    try:
        sess = sess or aws_client.session(settings.aws.region)
        eks = aws_client.client(sess, "eks", settings.aws.region)
        live = _describe(eks, cluster, principal)
        if action == "status":
            ours = live is not None and _ours(live, request)
            return None, "absent" if live is None else ("the hand-out's" if ours else "NOT the hand-out's")
        if action == "create":
            if live is None:
                eks.create_access_entry(**request)
                ok = _ours(_describe(eks, cluster, principal) or {}, request)
                return ok, f"{what}: " + ("created, then read back" if ok else "created, but NOT READ BACK")
            if _ours(live, request):
                return True, f"{what}: already there (kept)"
            return False, _not_ours(what, cluster, principal)
        if live is None:
            return True, f"{what}: absent (nothing to delete)"
        if not _ours(live, request):
            return False, _not_ours(what, cluster, principal)
        eks.delete_access_entry(clusterName=cluster, principalArn=principal)
        gone = _describe(eks, cluster, principal) is None
        return gone, f"{what}: " + ("deleted, then read back: absent" if gone else "STILL THERE")
    except (ClientError, BotoCoreError, aws_client.AwsError) as e:
        op = getattr(e, "operation_name", "") or "AWS"
        said = aws_client.err_msg(e) if isinstance(e, ClientError) else str(e)
        return (None if action == "status" else False), (
            f"{what}: {op} failed: {said}. Fix: run it with the facilitator's credentials, which need "
            "eks:DescribeAccessEntry, eks:CreateAccessEntry, eks:DeleteAccessEntry and eks:TagResource"
        )


def _describe(eks, cluster: str, principal: str) -> dict[str, Any] | None:
    try:
        return eks.describe_access_entry(clusterName=cluster, principalArn=principal)["accessEntry"]
    except eks.exceptions.ResourceNotFoundException:
        return None


def _ours(live: dict[str, Any], request: dict[str, Any]) -> bool:
    tags = live.get("tags") or {}
    groups = sorted(live.get("kubernetesGroups") or [])
    return all(tags.get(k) == v for k, v in request["tags"].items()) and groups == sorted(request["kubernetesGroups"])


def _not_ours(what: str, cluster: str, principal: str) -> str:
    return (
        f"{what} exists and is not this hand-out's (other tags or groups: another workshop's, or made by hand): "
        f"left alone (EKS allows one per principal). Fix: if nothing else needs it, `aws eks delete-access-entry "
        f"--cluster-name {cluster} --principal-arn {principal}`, then run handout namespaces again"
    )


__all__ = ["ACTIONS", "attendee_access"]
