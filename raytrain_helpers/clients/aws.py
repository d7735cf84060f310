"""boto3, thinly: sessions and clients, error codes, guarded calls, identity, pagination, tags, redaction.

Credentials come only from the standard boto3 chain (environment, ``AWS_PROFILE``, SSO, instance role...);
nothing here takes a key as a parameter, and nothing prints one: :func:`redact` scrubs the live credentials
out of any text before it is shown or saved. ``AWS_ENDPOINT_URL`` (honoured by botocore itself) points every
client at a test server such as moto.

Every call that can fail goes through one of two guards, so a failure becomes a named result where it is made:

* :func:`essential_call` - the step cannot go on without it (instance type offerings and facts, EKS describe):
  a failure raises :class:`AwsCallError`, ONE line naming the API, the IAM action and the fix (a notebook shows
  that line, not a traceback);
* :func:`optional_call` - a signal the step can do without (Spot placement scores, capacity reservations in
  use, service quotas, scaling activities): a failure becomes a :class:`Signal` whose :meth:`Signal.line` reads
  ``unavailable: <error code> for <IAM action>; <what the step uses instead>``, and the step goes on.

An answer that is not AWS's at all - an HTML error page (a proxy, or a test server such as a plain moto lacking the
API: HTTP 500 and ``<!doctype html>``) - is a failure like any other: botocore raises ``ResponseParserError`` for it
on XML services (EC2, STS, IAM: it is no ``BotoCoreError``) and a ``ClientError`` with code ``500`` and the page as
message on JSON services; both become the kind ``bad answer``, the page shown only by its title. A request botocore
itself refuses (``ParamValidationError``: a parameter this botocore does not know, a value of the wrong type) is a
bug or an old botocore, never an AWS signal: both guards raise :class:`AwsCallError` for it, one line naming the API.

Throttling and transient server errors are retried by botocore itself (:func:`client` sets its ``standard``
retry mode, or ``adaptive`` when ``AWS_RETRY_MODE=adaptive``); a guard only sees what survived the retries. Each
retry prints one line, and a server error that is not AWS's answer (an HTML page) is not retried
(:mod:`.aws_retry`).
"""

from __future__ import annotations

import functools
import os
import re
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import aws_retry

#: Added to every request's User-Agent, so the tutorial's calls can be told apart in CloudTrail.
USER_AGENT = "raytrain-tutorial"
#: Retries of throttled or transient failures (botocore's retry modes: exponential backoff with jitter).
MAX_ATTEMPTS = 8
#: botocore's retry modes the tutorial accepts in ``AWS_RETRY_MODE``; anything else means the first.
RETRY_MODES = ("standard", "adaptive")
CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 60
#: Environment variables that may carry credentials (scrubbed from any output).
CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
ACCESS_KEY_RE = re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b")


class AwsError(RuntimeError):
    """AWS could not be reached, refused a call, or a tool the AWS steps need is missing."""


#: IAM action prefixes that differ from the service's signing name (the prefix is the signing name otherwise).
IAM_PREFIXES: dict[str, str] = {}
#: Error codes by what they mean (anything else: ``error``); a botocore exception's class name counts as a code.
ERROR_KINDS: dict[str, frozenset[str]] = {
    "denied": frozenset(
        {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedAccess", "Forbidden"}
    ),
    "throttled": frozenset(
        {
            "Throttling",
            "ThrottlingException",
            "ThrottledException",
            "RequestLimitExceeded",
            "RequestThrottled",
            "RequestThrottledException",
            "TooManyRequestsException",
            "PriorRequestNotComplete",
            "SlowDown",
            "EC2ThrottledException",
            "BandwidthLimitExceeded",
        }
    ),
    "credentials": frozenset(
        {
            "ExpiredToken",
            "ExpiredTokenException",
            "InvalidClientTokenId",
            "UnrecognizedClientException",
            "AuthFailure",
            "SignatureDoesNotMatch",
            "RequestExpired",
            "NoCredentialsError",
            "PartialCredentialsError",
            "TokenRetrievalError",
            "SSOTokenLoadError",
            "UnauthorizedSSOTokenError",
        }
    ),
    "unsupported": frozenset(
        {"UnsupportedOperation", "InvalidAction", "UnknownOperationException", "OptInRequired", "NotImplemented"}
    ),
    "unavailable": frozenset(
        {
            "InternalError",
            "InternalFailure",
            "InternalServerError",
            "InternalServerException",
            "ServiceUnavailable",
            "ServiceUnavailableException",
            "Unavailable",
            "EndpointConnectionError",
            "ConnectTimeoutError",
            "ReadTimeoutError",
            "ConnectionClosedError",
            "EndpointResolutionError",
            "UnknownEndpointError",
        }
    ),
}


@dataclass(frozen=True)
class CallFailure:
    """One AWS call that failed, after botocore's retries."""

    #: The API operation, e.g. ``DescribeCapacityReservations``.
    api: str
    #: The IAM action it needs, e.g. ``ec2:DescribeCapacityReservations``.
    action: str
    region: str
    #: AWS's error code (``AccessDenied``, ``InternalError``...), or the botocore exception's class name.
    code: str
    message: str
    #: HTTP status of the last answer (0: no answer).
    status: int = 0

    def _kind_of_code(self) -> str:
        for kind, codes in ERROR_KINDS.items():
            if self.code in codes:
                return kind
        if self.status >= 500:
            return "unavailable"
        if self.status in (401, 403):
            return "denied"
        return "error"

    @property
    def kind(self) -> str:
        """``denied`` | ``throttled`` | ``credentials`` | ``unsupported`` | ``unavailable`` | ``bad answer`` |
        ``invalid request`` | ``error``."""
        if self.code == "ParamValidationError":
            return "invalid request"
        if self.code == "ResponseParserError" or looks_like_html(self.message):
            return "bad answer"
        return self._kind_of_code()

    def fix(self) -> str:
        """What the user can do about it."""
        return {
            "denied": f"allow {self.action} for this identity (its IAM policy, or ask the account's administrator)"
            f", then re-run this step",
            "throttled": f"AWS still throttled it after {MAX_ATTEMPTS + 1} attempts with {retry_mode()} retries; "
            f"wait a minute and re-run this step (AWS_RETRY_MODE=adaptive slows the calls down)",
            "credentials": "refresh the credentials of the active profile (e.g. `aws sso login`) and re-run this step",
            "unsupported": f"{self.region} does not offer {self.action} (another partition, or a region to opt in "
            f"to); choose another region",
            "unavailable": f"the service did not answer in {self.region}; re-run this step later (check "
            f"https://health.aws.amazon.com) or choose another region",
            "bad answer": _bad_answer_fix(self.api, self.region),
            "invalid request": f"botocore {_botocore_version()} refused to send {self.api}; if boto3 is older than "
            f"the pins of constraints.txt, reinstall them (`pip install -c constraints.txt boto3 botocore`), "
            f"otherwise this is a bug of raytrain-tutorial: report it with this line",
            "error": "correct what the message says, then re-run this step",
        }[self.kind]

    def brief_message(self, limit: int = 160) -> str:
        """AWS's message on one line, shortened (an HTML page: its title only)."""
        text = " ".join(plain_message(str(self.message)).split())
        return text if len(text) <= limit else text[: limit - 3] + "..."


_HTML_RE = re.compile(r"<!doctype html|<html[\s>]", re.IGNORECASE)
_TITLE_RE = re.compile(r"<title>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def looks_like_html(text: str) -> bool:
    """True when an error message is (or quotes) an HTML page rather than AWS's own words."""
    return bool(_HTML_RE.search(str(text or "")))


def plain_message(text: str) -> str:
    """An error message fit for one line: an HTML page becomes ``an HTML page: <its title>``; botocore's parser
    message (which quotes the whole body) is cut before the body."""
    text = str(text or "")
    if not looks_like_html(text):
        return text
    title = _TITLE_RE.search(text)
    return f"an HTML page, not an AWS answer: {' '.join(title.group(1).split()) if title else 'no title'}"


def _bad_answer_fix(api: str, region: str) -> str:
    endpoint = os.environ.get("AWS_ENDPOINT_URL", "").strip()
    if endpoint:
        return (
            f"AWS_ENDPOINT_URL={endpoint} answered {api} with something that is not an AWS answer: that server "
            f"does not implement {api} (a plain moto server, for one); unset AWS_ENDPOINT_URL to ask AWS itself"
        )
    return (
        f"the endpoint of {region} answered with something that is not an AWS answer (a proxy's error page?); "
        f"check HTTPS_PROXY / the network, then re-run this step"
    )


def _botocore_version() -> str:
    try:
        import botocore

        return botocore.__version__
    except ImportError:  # pragma: no cover - boto3 is a dependency of the aws target
        return "(not installed)"


class AwsCallError(AwsError):
    """An essential AWS call failed: the message is ONE line naming the API, the IAM action and the fix."""

    def __init__(self, failure: CallFailure) -> None:
        self.failure = failure
        f = failure
        shown = ("error", "unavailable", "bad answer", "invalid request")
        detail = f" - {f.brief_message()}" if f.kind in shown and f.message else ""
        super().__init__(
            f"{f.api} failed in {f.region} ({f.code}{detail}); it needs IAM action {f.action}. Fix: {f.fix()}"
        )

    def _render_traceback_(self) -> list[str]:
        """IPython (a notebook) shows this one line instead of a traceback."""
        return [f"{type(self).__name__}: {self}"]


@dataclass
class Signal:
    """An optional signal: its ``value``, or ``default`` and the failure that made it unavailable."""

    #: The call's result (the default when unavailable).
    value: Any
    #: What the step uses instead when the signal is unavailable (words for the user).
    instead: str
    failure: CallFailure | None = None
    #: Where the signal belongs (a region, a node group...); shown with the line.
    scope: str = field(default="")

    @property
    def available(self) -> bool:
        return self.failure is None

    def line(self) -> str:
        """``unavailable: <error code> for <IAM action>; <what is used instead>`` (empty when available)."""
        if self.failure is None:
            return ""
        return f"unavailable: {self.failure.code} for {self.failure.action}; {self.instead}"


# --------------------------------------------------------------------------------------------------------------
# Sessions, clients, errors
# --------------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def shared_loader():
    """One botocore data loader for every session of this process: each service model and endpoints.json is
    parsed once (about 20 ms to 1 s each, the EC2 model the largest), not once per session."""
    from botocore.loaders import create_loader

    return create_loader()


def session(region: str | None = None):
    """A boto3 session from the standard credential chain (profile, environment, SSO, role), resolved anew for
    each session; only the parsed API models are shared (:func:`shared_loader`)."""
    import boto3
    import botocore.session

    core = botocore.session.Session()
    core.register_component("data_loader", shared_loader())
    return boto3.session.Session(region_name=region, botocore_session=core)


#: The clients made for each live session, by (service, region, retry mode): a step asks its session for the same
#: client many times, and making one costs more than most calls (its endpoint rules and event hooks are built anew).
_CLIENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def client(sess, service: str, region: str | None = None):
    """A client of ``service`` with the tutorial's User-Agent, timeouts and retry policy; asked again with the same
    session, service and region, the same client (clients are thread-safe; a new session makes new ones)."""
    from botocore.config import Config

    region = region or sess.region_name
    key = (service, region, retry_mode())
    made = _CLIENTS.setdefault(sess, {})
    if key not in made:
        cfg = Config(
            user_agent_extra=USER_AGENT,
            retries={"max_attempts": MAX_ATTEMPTS, "mode": key[2]},
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=READ_TIMEOUT_S,
        )
        made[key] = sess.client(service, region_name=region, config=cfg)
        aws_retry.install(made[key])  # an answer that is not AWS's is not retried; each retry is a line
    return made[key]


def retry_mode() -> str:
    """botocore's retry mode for every client: ``adaptive`` when ``AWS_RETRY_MODE=adaptive``, else ``standard``."""
    mode = os.environ.get("AWS_RETRY_MODE", "").strip().lower()
    return mode if mode in RETRY_MODES else RETRY_MODES[0]


def err_code(e: Exception) -> str:
    """The AWS error code of a botocore ClientError or an :class:`AwsCallError` (the exception's class name for
    anything else)."""
    failure = getattr(e, "failure", None)
    if isinstance(failure, CallFailure):
        return failure.code
    return (getattr(e, "response", None) or {}).get("Error", {}).get("Code", type(e).__name__)


def err_msg(e: Exception) -> str:
    """The AWS error message of a botocore ClientError (``str(e)`` for anything else)."""
    return (getattr(e, "response", None) or {}).get("Error", {}).get("Message", str(e))


def iam_action(api, operation: str) -> str:
    """The IAM action of ``api.<operation>``, from the client's service model: ``ec2:DescribeInstanceTypes``."""
    model = api.meta.service_model
    name = api.meta.method_to_api_mapping.get(operation) or model.operation_model(operation).name
    prefix = IAM_PREFIXES.get(model.signing_name, model.signing_name)
    return f"{prefix}:{name}"


def call_errors() -> tuple[type[Exception], ...]:
    """What a guarded call turns into a named failure: botocore's ClientError and BotoCoreError (ParamValidationError
    is one) and its ResponseParserError (an answer that is not AWS's, e.g. an HTML page; no BotoCoreError)."""
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError

    return (ClientError, BotoCoreError, ResponseParserError)


def failure_of(api, operation: str, e: Exception) -> CallFailure:
    """What went wrong in ``api.<operation>`` (see :func:`call_errors`), named."""
    action = iam_action(api, operation)
    response = getattr(e, "response", None) or {}
    return CallFailure(
        api=action.split(":", 1)[1],
        action=action,
        region=api.meta.region_name or "",
        code=err_code(e),
        message=err_msg(e),
        status=int((response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0),
    )


def call(api, operation: str, *, items: str | None = None, **kwargs: Any) -> Any:
    """``api.<operation>(**kwargs)``'s response; with ``items=KEY``, every item under KEY of every page."""
    if items is not None:
        return pages(api, operation, items, **kwargs)
    return getattr(api, operation)(**kwargs)


def essential_call(api, operation: str, *, absent: Sequence[str] = (), items: str | None = None, **kwargs) -> Any:
    """:func:`call`, which the step cannot do without: a failure raises :class:`AwsCallError` (one line naming
    the API, the IAM action and the fix). ``absent``: error codes that mean "no such resource": None."""
    try:
        return call(api, operation, items=items, **kwargs)
    except call_errors() as e:
        if err_code(e) in absent:
            return None
        raise AwsCallError(failure_of(api, operation, e)) from None


def optional_call(
    api, operation: str, *, instead: str, default: Any = None, items: str | None = None, scope: str = "", **kwargs
) -> Signal:
    """:func:`call` for a signal the step can do without: a :class:`Signal` with the value, or with ``default``
    and the failure (``instead`` says what the step uses instead). Never raises for an AWS failure; a request
    botocore refuses to send (``ParamValidationError``) is no AWS answer but a bug: :class:`AwsCallError`."""
    try:
        return Signal(call(api, operation, items=items, **kwargs), instead, scope=scope)
    except call_errors() as e:
        failure = failure_of(api, operation, e)
        if failure.kind == "invalid request":
            raise AwsCallError(failure) from None
        return Signal(default, instead, failure, scope=scope)


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
    from botocore.parsers import ResponseParserError

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
    except ResponseParserError as e:
        raise AwsError(
            f"sts:GetCallerIdentity: {plain_message(str(e))}. Fix: {_bad_answer_fix('GetCallerIdentity', region)}"
        ) from None
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
    """Every item under ``key`` of every page of ``api.<operation>(**kwargs)``; essential: a failure raises
    :class:`AwsCallError` (wrap it in :func:`optional_call` with ``items=key`` for an optional list).

    boto3's paginator where the service model defines one; otherwise the ``NextToken`` protocol by hand.
    """
    return essential_call(api, operation, items=key, **kwargs)


def pages(api, operation: str, key: str, **kwargs: Any) -> list[dict[str, Any]]:
    """:func:`paginate` without the guard (botocore's exceptions propagate)."""
    if api.can_paginate(operation):
        return [item for page in api.get_paginator(operation).paginate(**kwargs) for item in page.get(key, [])]
    fetch = getattr(api, operation)
    out: list[dict[str, Any]] = []
    while True:
        page = fetch(**kwargs)
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
    """``eks:DescribeCluster``'s cluster, or None when there is no such cluster (essential: see
    :func:`essential_call`)."""
    resp = essential_call(eks, "describe_cluster", absent=("ResourceNotFoundException",), name=name)
    return None if resp is None else resp["cluster"]


def describe_nodegroup(eks, cluster: str, name: str) -> dict[str, Any] | None:
    """``eks:DescribeNodegroup``'s node group, or None when there is no such node group (essential)."""
    resp = essential_call(
        eks, "describe_nodegroup", absent=("ResourceNotFoundException",), clusterName=cluster, nodegroupName=name
    )
    return None if resp is None else resp["nodegroup"]
