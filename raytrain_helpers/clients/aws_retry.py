"""botocore's retries, told apart and shown: an answer that is not AWS's is not retried, and every retry is a line.

botocore's ``standard`` retry mode (``botocore/retries/standard.py``: ``register_retry_handler``, botocore 1.43.11)
retries any HTTP 500, 502, 503 or 504 with exponential backoff, up to the client's ``total_max_attempts``. That is
right for AWS's own transient errors (``InternalError``, ``ServiceUnavailable``, ``SlowDown``: an XML or JSON body
that names the error), and nine attempts of a page that is not AWS's answer at all - an HTML error page from a
proxy, or from a test server lacking the API (a plain moto server answers an API it lacks with werkzeug's "500
Internal Server Error" page) - only add a minute of silence per call. :func:`install` replaces the client's
``needs-retry`` handler (the one the client made, under botocore's own ``retry-config-<service>`` id) with one that:

* does not retry an answer of HTTP 500 or more whose body is not AWS's: non-empty and neither JSON (``{``) nor XML
  (``<`` and not an HTML page). An empty body is AWS's own (a ``HEAD`` request's 503 carries none) and is retried;
* otherwise asks botocore's standard handler (its conditions, backoff and retry quota unchanged), and when that
  retries, says so first: one line per retry on stderr with the IAM action, the answer and the attempt.

Where botocore raises before any retry decision (``ResponseParserError`` on an XML service's HTML page: the
response never reaches ``needs-retry``), nothing changes: that failure already comes back at the first attempt.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

#: What the retry lines are written to (a test may swap it).
STREAM = None


def not_aws_answer(status: int, body: bytes) -> bool:
    """Whether an answer of HTTP ``status`` with ``body`` is a server error that is not AWS's: non-empty, neither
    JSON nor XML (an HTML page, plain text)."""
    if status < 500:
        return False
    head = (body or b"")[:256].lstrip().lower()
    if not head:
        return False
    if head.startswith((b"<!doctype html", b"<html")):
        return True
    return not head.startswith((b"{", b"<"))


def install(api) -> None:
    """Put :func:`needs_retry` in place of the client's standard ``needs-retry`` handler (see the module)."""
    from botocore.retries import standard

    total = (api.meta.config.retries or {}).get("total_max_attempts")
    if api.meta.config.retries.get("mode") not in ("standard", "adaptive") or not total:
        return
    svc = api.meta.service_model.service_id.hyphenize()
    event, uid = f"needs-retry.{svc}", f"retry-config-{svc}"
    api.meta.events.unregister(event, unique_id=uid)
    handler = standard.register_retry_handler(api, max_attempts=total)  # botocore's own, registered under ``uid``
    api.meta.events.unregister(event, unique_id=uid)
    prefix = api.meta.service_model.signing_name
    api.meta.events.register(
        event, functools.partial(needs_retry, handler.needs_retry, prefix=prefix, total=total), unique_id=uid
    )


def needs_retry(inner, *, prefix: str, total: int, **kwargs: Any):
    """botocore's ``needs-retry`` event: ``False`` (no retry) for an answer that is not AWS's, else ``inner``'s
    delay, announced by one line when it retries."""
    response, operation, attempts = kwargs.get("response"), kwargs.get("operation"), kwargs.get("attempts", 1)
    http = response[0] if response else None
    if http is not None and not_aws_answer(http.status_code, http.content):
        return False  # not worth another attempt: the guard names the answer (clients.aws.CallFailure)
    delay = inner(**kwargs)
    if delay:
        action = f"{prefix}:{getattr(operation, 'name', '?')}"
        print(
            f"AWS: {action} answered {_what(response, kwargs.get('caught_exception'))}; retrying in {delay:.1f} s "
            f"(attempt {attempts + 1} of {total})",
            file=STREAM or sys.stderr,
            flush=True,
        )
    return delay


def _what(response, exc) -> str:
    if exc is not None:
        return type(exc).__name__
    http, parsed = response
    code = ((parsed or {}).get("Error") or {}).get("Code", "")
    return f"HTTP {http.status_code}" + (f" {code}" if code and code != str(http.status_code) else "")


__all__ = ["STREAM", "install", "needs_retry", "not_aws_answer"]
