"""boto3, thinly: sessions and clients, error codes, identity, pagination, tags, and credential redaction.

Credentials come only from the standard boto3 chain (environment, ``AWS_PROFILE``, SSO, instance role...);
nothing here takes a key as a parameter, and nothing prints one: :func:`redact` scrubs the live credentials
out of any text before it is shown or saved. ``AWS_ENDPOINT_URL`` (honoured by botocore itself) points every
client at a test server such as moto.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: Added to every request's User-Agent, so the tutorial's calls can be told apart in CloudTrail.
USER_AGENT = "raytrain-tutorial"
#: Retries of throttled or transient failures (botocore's "standard" mode: exponential backoff with jitter).
MAX_ATTEMPTS = 8
CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 60
#: Environment variables that may carry credentials (scrubbed from any output).
CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
ACCESS_KEY_RE = re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b")


class AwsError(RuntimeError):
    """AWS could not be reached, refused a call, or a tool the AWS steps need is missing."""


# --------------------------------------------------------------------------------------------------------------
# Sessions, clients, errors
# --------------------------------------------------------------------------------------------------------------


def session(region: str | None = None):
    """A boto3 session from the standard credential chain (profile, environment, SSO, role)."""
    import boto3

    return boto3.session.Session(region_name=region)


def client(sess, service: str, region: str | None = None):
    """A client of ``service`` with the tutorial's User-Agent, timeouts and retry policy."""
    from botocore.config import Config

    cfg = Config(
        user_agent_extra=USER_AGENT,
        retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"},
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
    )
    return sess.client(service, region_name=region or sess.region_name, config=cfg)


def err_code(e: Exception) -> str:
    """The AWS error code of a botocore ClientError (the exception's class name for anything else)."""
    return getattr(e, "response", {}).get("Error", {}).get("Code", type(e).__name__)


def err_msg(e: Exception) -> str:
    """The AWS error message of a botocore ClientError (``str(e)`` for anything else)."""
    return getattr(e, "response", {}).get("Error", {}).get("Message", str(e))


@dataclass
class Identity:
    account: str
    arn: str
    region: str

    def line(self) -> str:
        return f"AWS account {self.account} ({self.arn}), region {self.region}"


def identity(sess, region: str) -> Identity:
    """Who are we? Raises :class:`AwsError` (with the fix) when no credentials resolve."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        who = client(sess, "sts", region).get_caller_identity()
    except NoCredentialsError:
        raise AwsError(
            "no AWS credentials found. Fix: `aws configure`, `aws sso login --profile NAME` and "
            "`export AWS_PROFILE=NAME`, or run where an instance/role profile provides them"
        ) from None
    except ClientError as e:
        raise AwsError(
            f"sts:GetCallerIdentity failed ({err_code(e)}): {err_msg(e)}. Fix: refresh "
            f"the credentials of the active profile (e.g. `aws sso login`)"
        ) from None
    except BotoCoreError as e:
        raise AwsError(f"cannot reach AWS STS: {e}") from None
    return Identity(account=who["Account"], arn=who["Arn"], region=region)


def redact(text: str, sess=None) -> str:
    """Remove anything credential-like from text that is about to be printed or saved."""
    secrets: list[str] = []
    if sess is not None:
        try:
            creds = sess.get_credentials()
            if creds is not None:
                frozen = creds.get_frozen_credentials()
                secrets = [s for s in (frozen.access_key, frozen.secret_key, frozen.token) if s]
        except Exception:  # noqa: BLE001 - redaction must never fail the caller
            secrets = []
    secrets += [os.environ[name] for name in CREDENTIAL_VARIABLES if os.environ.get(name)]
    for s in sorted(set(secrets), key=len, reverse=True):
        if len(s) >= 8:
            text = text.replace(s, "***")
    return ACCESS_KEY_RE.sub("***", text)


# --------------------------------------------------------------------------------------------------------------
# Reading lists: one pagination helper, tags
# --------------------------------------------------------------------------------------------------------------


def paginate(api, operation: str, key: str, **kwargs: Any) -> list[dict[str, Any]]:
    """Every item under ``key`` of every page of ``api.<operation>(**kwargs)``.

    boto3's paginator where the service model defines one; otherwise the ``NextToken`` protocol by hand.
    """
    if api.can_paginate(operation):
        return [item for page in api.get_paginator(operation).paginate(**kwargs) for item in page.get(key, [])]
    call = getattr(api, operation)
    out: list[dict[str, Any]] = []
    while True:
        page = call(**kwargs)
        out.extend(page.get(key, []))
        if not page.get("NextToken"):
            return out
        kwargs["NextToken"] = page["NextToken"]


def tags_of(resource: dict[str, Any]) -> dict[str, str]:
    """A resource's ``Tags`` list (``[{Key, Value}]``) as a dict."""
    return {t["Key"]: t["Value"] for t in resource.get("Tags", [])}


def with_tag(resources: Iterable[dict[str, Any]], key: str, value: str | None = None) -> list[dict[str, Any]]:
    """The resources carrying tag ``key`` (with ``value``, when given)."""
    out = []
    for r in resources:
        tags = tags_of(r)
        if key in tags and (value is None or tags[key] == value):
            out.append(r)
    return out


def tagged_reservations(
    ec2, key: str, value: str | None = None, states: Sequence[str] = ("active", "pending")
) -> list[dict[str, Any]]:
    """Capacity reservations in ``states`` tagged ``key`` (=``value``).

    Tag filters are not documented for ``DescribeCapacityReservations``: the tags are matched here.
    """
    found = paginate(
        ec2,
        "describe_capacity_reservations",
        "CapacityReservations",
        Filters=[{"Name": "state", "Values": list(states)}],
    )
    return with_tag(found, key, value)


# --------------------------------------------------------------------------------------------------------------
# Describing one resource: None when it does not exist
# --------------------------------------------------------------------------------------------------------------


def describe_cluster(eks, name: str) -> dict[str, Any] | None:
    """``eks:DescribeCluster``'s cluster, or None when there is no such cluster."""
    from botocore.exceptions import ClientError

    try:
        return eks.describe_cluster(name=name)["cluster"]
    except ClientError as e:
        if err_code(e) == "ResourceNotFoundException":
            return None
        raise


def describe_nodegroup(eks, cluster: str, name: str) -> dict[str, Any] | None:
    """``eks:DescribeNodegroup``'s node group, or None when there is no such node group."""
    from botocore.exceptions import ClientError

    try:
        return eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]
    except ClientError as e:
        if err_code(e) == "ResourceNotFoundException":
            return None
        raise
