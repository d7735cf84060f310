"""A restricted IAM role and injected faults for the aws fakes (test-only).

* :func:`restricted_role` - moto enforces IAM while the block runs (``moto.core.authorization
  .enable_iam_authentication``, what ``INITIAL_NO_AUTH_ACTION_COUNT=0`` does): a role is created with a policy
  that allows exactly the given actions (and explicitly denies others), assumed through STS, and its temporary
  credentials are put into ``os.environ`` - so every boto3 session the code under test opens is that role, as in
  a workshop account. Works with ``mock_aws`` and with a ThreadedMotoServer started in this process.
* :func:`inject` - the next call(s) of one operation in one region are answered with an HTTP error (status and
  code), shaped like the real protocol's error (EC2 XML, query XML or JSON), e.g. an HTTP 500 ``InternalError``
  from ``DescribeCapacityReservations`` or ``RequestLimitExceeded`` (throttling): botocore's own retries see
  them as they would see AWS's.

moto 5.2.1 gaps handled here: its IAM check answers JSON-protocol services (Service Quotas, EKS) with an XML
body, which botocore cannot parse (code ``403``); the body is rewritten as the JSON ``AccessDeniedException``
those services send. And moto 5.2.1 computes a different SigV4 signature than botocore for some rest-json
requests (EKS), so the signature check is skipped while the block runs: the block checks permissions, not
signatures.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from .moto_ext import shared_on_moto

ACCOUNT = "123456789012"  # moto's default account
ROLE_NAME = "raytrain-workshop"

#: The IAM actions of step 01 (capacity) on aws: essential ones first, then the optional signals.
CAPACITY_ESSENTIAL = (
    "ec2:DescribeRegions",
    "ec2:DescribeAvailabilityZones",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "eks:DescribeCluster",
)
CAPACITY_OPTIONAL = (
    "ec2:DescribeInstances",
    "ec2:DescribeCapacityReservations",
    "ec2:GetSpotPlacementScores",
    "servicequotas:GetServiceQuota",
    "servicequotas:GetAWSDefaultServiceQuota",
)


@dataclass
class FaultState:
    #: (operation, region) -> [HTTP status, error code, answers left (None: every call)]
    faults: dict[tuple[str, str], list] = field(default_factory=dict)
    #: (operation, region) of every call answered with a fault
    hits: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def take(self, operation: str, region: str) -> tuple[int, str] | None:
        with self.lock:
            fault = self.faults.get((operation, region))
            if fault is None:
                return None
            status, code, left = fault
            if left is not None:
                if left <= 0:
                    return None
                fault[2] = left - 1
            self.hits.append((operation, region))
            return status, code

    def clear(self) -> None:
        with self.lock:
            self.faults.clear()
            self.hits.clear()


FAULTS = shared_on_moto("_raytrain_fault_state", FaultState)


def inject(operation: str, region: str, status: int, code: str, times: int | None = None) -> None:
    """Answer ``operation`` (e.g. ``DescribeCapacityReservations``) in ``region`` with HTTP ``status`` and
    error ``code``: the next ``times`` calls, or every call (None)."""
    install()
    with FAULTS.lock:
        FAULTS.faults[(operation, region)] = [status, code, times]


def clear() -> None:
    FAULTS.clear()


# --------------------------------------------------------------------------------------------
# The wrapper around moto's dispatch
# --------------------------------------------------------------------------------------------


def _is_json(self) -> bool:  # noqa: ANN001 - a moto response object
    ctype = str(self.headers.get("Content-Type") or self.headers.get("content-type") or "")
    return "json" in ctype or bool(self.headers.get("X-Amz-Target") or self.headers.get("x-amz-target"))


def _error_body(self, code: str, message: str) -> tuple[dict[str, str], str]:  # noqa: ANN001
    from moto.ec2.responses import EC2Response

    if _is_json(self) or type(self).__name__ == "EKSResponse":
        return {"Content-Type": "application/x-amz-json-1.1", "x-amzn-ErrorType": code}, json.dumps(
            {"__type": code, "message": message, "Message": message}
        )
    if isinstance(self, EC2Response):
        return {"Content-Type": "text/xml"}, (
            f'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error></Errors><RequestID>{uuid.uuid4()}</RequestID></Response>"
        )
    return {"Content-Type": "text/xml"}, (
        f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>"
        f"<RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>"
    )


def _wrap_call_action(original):
    def call_action(self):  # noqa: ANN001
        fault = FAULTS.take(self._get_action(), self.region)
        if fault is not None:
            status, code = fault
            headers, body = _error_body(self, code, f"injected fault: HTTP {status} {code}")
            headers["status"] = str(status)
            return status, headers, body
        status, headers, body = original(self)
        text = body.decode() if isinstance(body, bytes) else str(body)
        if status == 403 and "<Code>AccessDenied</Code>" in text and (_is_json(self) or "EKS" in type(self).__name__):
            message = text.split("<Message>", 1)[-1].split("</Message>", 1)[0]
            extra, body = _error_body(self, "AccessDeniedException", message)
            headers = {**dict(headers or {}), **extra}
        return status, headers, body

    return call_action


def install() -> None:
    """Wrap moto's dispatch once (idempotent); without faults or IAM enforcement it changes nothing."""
    from moto.core.responses import BaseResponse

    if getattr(BaseResponse, "_raytrain_faults_installed", False):
        return
    BaseResponse.call_action = _wrap_call_action(BaseResponse.call_action)
    BaseResponse._raytrain_faults_installed = True


# --------------------------------------------------------------------------------------------
# A restricted role
# --------------------------------------------------------------------------------------------


def policy(allow: Sequence[str], deny: Sequence[str] = ()) -> dict:
    statements = [{"Effect": "Allow", "Action": list(allow), "Resource": "*"}]
    if deny:
        statements.append({"Effect": "Deny", "Action": list(deny), "Resource": "*"})
    return {"Version": "2012-10-17", "Statement": statements}


@contextlib.contextmanager
def restricted_role(allow: Sequence[str], deny: Sequence[str] = (), region: str = "us-west-2") -> Iterator[str]:
    """Run the block as a role allowed only ``allow`` (minus ``deny``), with moto enforcing IAM; yields its ARN.

    The role is created and assumed before enforcement starts (with the credentials already in the environment,
    as an administrator would); ``os.environ``'s credentials are restored afterwards.
    """
    import boto3
    from moto.core.authorization import enable_iam_authentication
    from moto.iam.access_control import IAMRequestBase

    install()
    iam = boto3.client("iam", region_name=region)
    name = f"{ROLE_NAME}-{uuid.uuid4().hex[:8]}"
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "sts:AssumeRole"}
        ],
    }
    arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.put_role_policy(RoleName=name, PolicyName="workshop", PolicyDocument=json.dumps(policy(allow, deny)))
    creds = boto3.client("sts", region_name=region).assume_role(RoleArn=arn, RoleSessionName="workshop")["Credentials"]
    keys = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(
        AWS_ACCESS_KEY_ID=creds["AccessKeyId"],
        AWS_SECRET_ACCESS_KEY=creds["SecretAccessKey"],
        AWS_SESSION_TOKEN=creds["SessionToken"],
    )
    check_signature = IAMRequestBase.check_signature
    IAMRequestBase.check_signature = lambda self: None
    try:
        with enable_iam_authentication():
            yield arn
    finally:
        IAMRequestBase.check_signature = check_signature
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
