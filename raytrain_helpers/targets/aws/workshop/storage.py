"""A workshop's checkpoint storage, one namespace per attendee: the facilitator's storage role associated with
every attendee's ServiceAccount (``raytrain-tutorial handout storage DIR``), read back (``handout status``) and
removed (``handout teardown``).

Step 02 in the facilitator's folder creates the bucket, the storage role and the association of the facilitator's
own namespace (:mod:`.storage`). With ``aws.storage_per_namespace`` that role's policy grants objects only under
``<prefix>/${aws:PrincipalTag/kubernetes-namespace}/``, so one role serves every namespace and keeps each to its
own prefix. :func:`attendee_storage` adds, for one attendee, one EKS Pod Identity association (EKS API
``CreatePodIdentityAssociation``: clusterName, namespace, serviceAccount, roleArn, tags; botocore 1.43.11's
``eks`` service model) tagged ``raytrain-tutorial=<cluster>`` and ``raytrain-tutorial/attendee=<run_name>`` (the
keys of the hand-out's Namespace labels), after checking, with the role's policy as IAM holds it, that the
attendee's pods could use their prefix and nothing else (:func:`raytrain_helpers.plan.iam.policy_problems`).

It never modifies what it did not create: an association of the same namespace/ServiceAccount (EKS allows one:
``ResourceInUseException``) that lacks those tags, names another role, or runs with ``disableSessionTags`` (the
policy's variable would then have no value) is reported with its id and left as it is; the teardown deletes
only associations carrying both tags.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from ....clients import aws as aws_client
from ....core.settings import Settings
from ....core.validation import ConfigError
from ....plan import iam
from ..storage.state import TAG_KEY, find_association, get_role, load_record
from .facilitator import ATTENDEE_LABEL

#: The tag of an attendee's association: the same key as the hand-out's Namespace label.
ATTENDEE_TAG = ATTENDEE_LABEL
ACTIONS = ("share", "status", "remove")


def association_tags(settings: Settings) -> dict[str, str]:
    """The tags the hand-out puts on an attendee's association (and looks for before deleting one)."""
    return {TAG_KEY: settings.aws.cluster_name, ATTENDEE_TAG: settings.run_name}


def attendee_storage(
    settings: Settings, action: str = "status", *, facilitator: Settings | None = None, sess=None
) -> tuple[bool | None, str]:
    """``share``: associate the facilitator's storage role with the attendee's ServiceAccount; ``status``: is it
    associated; ``remove``: delete the hand-out's association. (done, what happened); done is None for a status
    that could not be read. Idempotent; a refusal names the setting and the fix."""
    from botocore.exceptions import BotoCoreError, ClientError

    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}")
    region = settings.aws.region
    try:
        sess = sess or aws_client.session(region)
        eks = aws_client.client(sess, "eks", region)
        if action == "status":
            return None, _status(settings, eks)
        if action == "remove":
            return _remove(settings, eks)
        if facilitator is None:
            raise ConfigError("sharing the storage needs the facilitator's settings. Fix: DIR/facilitator/env.yaml")
        role_arn = _checked_role(facilitator, settings, sess)
        return _share(settings, eks, role_arn)
    except ConfigError as e:
        return (None if action == "status" else False), f"refused: {e}"
    except (ClientError, BotoCoreError, aws_client.AwsError) as e:
        op = getattr(e, "operation_name", "") or "AWS"
        said = f"{op} failed: {aws_client.err_msg(e) if isinstance(e, ClientError) else e}"
        return (None if action == "status" else False), f"{said}. Fix: {_permission_fix(action)}"


def _permission_fix(action: str) -> str:
    needs = {
        "share": "eks:ListPodIdentityAssociations, eks:DescribePodIdentityAssociation, "
        "eks:CreatePodIdentityAssociation, iam:GetRole, iam:ListRoleTags, iam:GetRolePolicy",
        "status": "eks:ListPodIdentityAssociations, eks:DescribePodIdentityAssociation",
        "remove": "eks:ListPodIdentityAssociations, eks:DescribePodIdentityAssociation, "
        "eks:DeletePodIdentityAssociation",
    }[action]
    return f"run it with the facilitator's credentials, which need {needs}"


def _found(settings: Settings, eks) -> dict[str, Any] | None:
    """The association of the attendee's namespace/ServiceAccount, described (with roleArn and tags), or None."""
    return find_association(eks, settings, guarded=False)


def _ours(settings: Settings, assoc: dict[str, Any]) -> bool:
    tags = assoc.get("tags") or {}
    return all(tags.get(k) == v for k, v in association_tags(settings).items())


def _role_name(arn: str) -> str:
    return arn.rsplit("/", 1)[-1] if arn else "?"


def _status(settings: Settings, eks) -> str:
    assoc = _found(settings, eks)
    if assoc is None:
        return "absent"
    role = _role_name(assoc.get("roleArn", ""))
    return f"associated ({role})" if _ours(settings, assoc) else f"not the hand-out's ({role})"


def _remove(settings: Settings, eks) -> tuple[bool, str]:
    k, cluster = settings.kubernetes, settings.aws.cluster_name
    what = f"storage association {k.namespace}/{k.service_account}"
    assoc = _found(settings, eks)
    if assoc is None:
        return True, f"{what}: absent (nothing to delete)"
    if not _ours(settings, assoc):
        tags = ", ".join(f"{a}={b}" for a, b in association_tags(settings).items())
        return False, (
            f"{what} ({assoc['associationId']}) is not tagged {tags} by the hand-out: left alone. Fix: delete it "
            f"yourself if it is this attendee's (aws eks delete-pod-identity-association --cluster-name {cluster} "
            f"--association-id {assoc['associationId']})"
        )
    eks.delete_pod_identity_association(clusterName=cluster, associationId=assoc["associationId"])
    gone = _found(settings, eks) is None
    return gone, f"{what}: " + ("deleted, then read back: absent" if gone else "STILL THERE")


def _share(settings: Settings, eks, role_arn: str) -> tuple[bool, str]:
    k, cluster = settings.kubernetes, settings.aws.cluster_name
    what = f"storage association {k.namespace}/{k.service_account} -> {_role_name(role_arn)}"
    assoc = _found(settings, eks)
    if assoc is None:
        eks.create_pod_identity_association(
            clusterName=cluster,
            namespace=k.namespace,
            serviceAccount=k.service_account,
            roleArn=role_arn,
            tags=association_tags(settings),
        )
        assoc = _found(settings, eks)
        ok = assoc is not None and _ours(settings, assoc) and assoc.get("roleArn") == role_arn
        return ok, f"{what}: " + ("created, then read back" if ok else "created, but NOT READ BACK")
    conflict = _conflict(settings, assoc, role_arn)
    if conflict:
        return False, (
            f"{what}: an association of this namespace/ServiceAccount exists ({assoc['associationId']}) and "
            f"{conflict}: left alone (EKS allows one per ServiceAccount). Fix: if nothing else needs it, `aws eks "
            f"delete-pod-identity-association --cluster-name {cluster} --association-id {assoc['associationId']}`, "
            f"then run handout storage again"
        )
    return True, f"{what}: already there (kept)"


def _conflict(settings: Settings, assoc: dict[str, Any], role_arn: str) -> str:
    """Why an existing association is not the one the hand-out would create ('' when it is)."""
    if not _ours(settings, assoc):
        tags = ", ".join(f"{a}={b}" for a, b in association_tags(settings).items())
        return f"was not created by the hand-out (no tags {tags})"
    if assoc.get("roleArn") != role_arn:
        return f"names role {assoc.get('roleArn')}, not the storage role {role_arn}"
    if assoc.get("disableSessionTags") or assoc.get("targetRoleArn") or assoc.get("policy"):
        return "disables its session tags, or adds a target role or a policy (the role's policy reads the tags)"
    return ""


def _checked_role(facilitator: Settings, settings: Settings, sess) -> str:
    """The facilitator's storage role ARN, once the settings and the role's policy (as IAM holds it) show that the
    attendee's pods would reach their own prefix: else a ConfigError naming the setting and the fix."""
    fa, a = facilitator.aws, settings.aws
    if (a.cluster_name, a.region) != (fa.cluster_name, fa.region):
        raise ConfigError(
            f"the attendee's cluster {a.cluster_name} ({a.region}) is not the facilitator's {fa.cluster_name} "
            f"({fa.region}). Fix: only attendees of the shared cluster get the shared storage role"
        )
    for who, s in (("the facilitator's", facilitator), ("the attendee's", settings)):
        if not s.aws.storage_per_namespace:
            raise ConfigError(
                f"aws.storage_per_namespace is false in {who} env.yaml: one storage role would let every attendee "
                f"reach the same prefix. Fix: storage_per_namespace: true in the hand-out's base (-f base.yaml), "
                f"write the hand-out again, run `raytrain-tutorial cluster up --yes` in the facilitator's folder "
                f"(02 rewrites the role's policy), then handout storage"
            )
    rec = load_record(facilitator)
    if not rec:
        raise ConfigError(
            "step 02 has not prepared the storage in the facilitator's folder. Fix: cd DIR/facilitator && "
            "raytrain-tutorial cluster up --yes"
        )
    if rec.get("mode") != "pod-identity":
        raise ConfigError(
            f"the storage role is bound by {rec.get('mode')}, which attaches no kubernetes-namespace session tag. "
            f"Fix: aws.pod_identity: pod-identity in the facilitator's env.yaml, then cluster up again"
        )
    return _check_policy(settings, sess, rec)


def _check_policy(settings: Settings, sess, rec: dict[str, Any]) -> str:
    role_arn, account = rec["role_arn"], rec["role_arn"].split(":")[4]
    iam_api = aws_client.client(sess, "iam", settings.aws.region)
    role = get_role(iam_api, _role_name(role_arn))
    if role is None or aws_client.tags_of(role).get(TAG_KEY) != settings.aws.cluster_name:
        raise ConfigError(
            f"the storage role {_role_name(role_arn)} of the facilitator's 02 is missing or not the tutorial's "
            f"(tag {TAG_KEY}={settings.aws.cluster_name}). Fix: raytrain-tutorial cluster up --yes in the "
            f"facilitator's folder"
        )
    loc = iam.storage_location(settings, account)
    if loc.bucket != rec.get("bucket"):
        raise ConfigError(
            f"the attendee's storage {loc.uri} is not in the facilitator's bucket {rec.get('bucket')}. Fix: leave "
            f"storage_bucket and storage_path out of the roster, so every attendee shares the base's bucket"
        )
    doc = iam_api.get_role_policy(RoleName=_role_name(role_arn), PolicyName=iam.POLICY_NAME)["PolicyDocument"]
    doc = json.loads(unquote(doc)) if isinstance(doc, str) else doc
    short = iam.policy_problems(doc, iam.policy_location(settings, loc), iam.principal_tags(settings))
    if short:
        raise ConfigError(
            f"the storage role's policy does not keep namespace {settings.kubernetes.namespace} to {loc.uri}: "
            f"{short[0]}. Fix: raytrain-tutorial cluster up --yes in the facilitator's folder (02 writes the policy "
            f"for storage_per_namespace), then handout storage again"
        )
    return role_arn


__all__ = ["ACTIONS", "ATTENDEE_TAG", "association_tags", "attendee_storage"]
