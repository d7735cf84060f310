"""An AWS API that answers badly is a named row, never a traceback: against a PLAIN moto server.

The server runs in its own process (``python -m moto.server``), so none of ``tests/fakes/aws/moto_ext``'s added
operations exist there: the APIs moto 5.2.1 lacks answer the way a server lacking them does, HTTP 500 with an
HTML page (werkzeug's "500 Internal Server Error"). Measured 2026-12-04 with moto 5.2.1 / botocore 1.43.11:
on EC2 (an XML service) botocore raises ``botocore.parsers.ResponseParserError`` ("invalid XML received"), which is
NOT a ``BotoCoreError``; on Service Quotas (a JSON service) a ``ClientError`` whose code is ``"500"`` and whose
message is the HTML page.
"""

from __future__ import annotations

import importlib
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[5]))

from raytrain_helpers.clients import aws as aws_client  # noqa: E402
from tests.fakes.aws.fixtures import make_settings  # noqa: E402
from tests.helpers import free_port  # noqa: E402

placement = importlib.import_module("raytrain_helpers.targets.aws.placement.capacity")

pytestmark = pytest.mark.timeout(120)
R = "us-west-2"


@pytest.fixture(scope="module")
def plain_moto():
    """``python -m moto.server`` in a subprocess: moto exactly as published, nothing added."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("the plain moto server did not start")
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def endpoint(plain_moto, monkeypatch, tmp_path):
    for k in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "RAYTRAIN_RUNS_DIR"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", plain_moto)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAPLAINMOTO0000001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "plain-moto-secret-key-not-real-000000000")
    monkeypatch.setenv("AWS_DEFAULT_REGION", R)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    # the retries stay as they are: an HTML 500 is not retried (clients.aws_retry), so each call is one attempt
    return plain_moto


def _ec2():
    return aws_client.client(aws_client.session(R), "ec2", R)


def test_an_html_500_on_an_xml_service_is_a_named_row(endpoint):
    sig = aws_client.optional_call(
        _ec2(),
        "describe_capacity_block_offerings",
        instead="no Capacity Block offerings listed",
        default=[],
        items="CapacityBlockOfferings",
        InstanceType="p5.48xlarge",
        InstanceCount=1,
        CapacityDurationHours=24,
    )
    assert sig.value == [] and sig.failure.code == "ResponseParserError" and sig.failure.kind == "bad answer"
    assert sig.line() == (
        "unavailable: ResponseParserError for ec2:DescribeCapacityBlockOfferings; no Capacity Block offerings listed"
    )
    fix = sig.failure.fix()
    assert f"AWS_ENDPOINT_URL={endpoint}" in fix and "does not implement DescribeCapacityBlockOfferings" in fix


def test_an_html_500_on_an_essential_call_is_one_line_with_the_pages_title(endpoint):
    with pytest.raises(aws_client.AwsCallError) as info:
        aws_client.essential_call(_ec2(), "get_spot_placement_scores", InstanceTypes=["g6.12xlarge"], TargetCapacity=2)
    msg = str(info.value)
    assert "\n" not in msg and "<" not in msg, msg
    assert msg.startswith("GetSpotPlacementScores failed in us-west-2 (ResponseParserError - an HTML page, not an AWS")
    assert "500 Internal Server Error" in msg and "IAM action ec2:GetSpotPlacementScores" in msg


def test_an_html_500_on_a_json_service_is_named_the_same_way(endpoint):
    sq = aws_client.client(aws_client.session(R), "service-quotas", R)
    sig = aws_client.optional_call(
        sq, "get_aws_default_service_quota", instead="x", ServiceCode="ec2", QuotaCode="L-DB2E81BA"
    )
    assert sig.failure.code == "500" and sig.failure.status == 500 and sig.failure.kind == "bad answer"
    assert sig.failure.brief_message() == "an HTML page, not an AWS answer: 500 Internal Server Error"


def test_a_request_botocore_refuses_is_a_bug_in_one_line_not_a_row(endpoint):
    with pytest.raises(aws_client.AwsCallError, match=r"^DescribeRegions failed .*ParamValidationError.*botocore"):
        aws_client.optional_call(_ec2(), "describe_regions", instead="x", AllRegions="yes-please")


def test_step_01_against_a_plain_moto_server_shows_which_api_failed_and_what_it_skipped(endpoint, tmp_path, capsys):
    rep = placement.capacity(make_settings(tmp_path), regions=[R], save=False)
    rep.show()
    out = capsys.readouterr().out
    assert "Traceback" not in out
    lines = {u.failure.api: u.line() for u in rep.unavailable}
    assert lines["GetSpotPlacementScores"] == (
        f"unavailable: ResponseParserError for ec2:GetSpotPlacementScores; {placement.INSTEAD['spot']}"
    )
    assert lines["DescribeCapacityReservations"].endswith(placement.INSTEAD["reservations"])
    for line in lines.values():
        assert line in out  # the table row (wide enough for the whole line)
    assert rep.rows and rep.rows[0].spot_score is None  # the ranking went on without the Spot scores


def _sends(api) -> list[int]:
    """The HTTP requests ``api`` sends (one per attempt)."""
    sent: list[int] = []
    api.meta.events.register("before-send", lambda **k: sent.append(1))
    return sent


def test_an_html_500_is_not_retried_at_all(plain_moto, monkeypatch, tmp_path, capsys):
    """With the default retries (not the fixture's 0): an HTML page is not AWS's answer, one attempt is enough."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", plain_moto)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAPLAINMOTO0000001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "plain-moto-secret-key-not-real-000000000")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    assert aws_client.MAX_ATTEMPTS == 8
    sq = aws_client.client(aws_client.session(R), "service-quotas", R)
    sent = _sends(sq)
    sig = aws_client.optional_call(sq, "get_aws_default_service_quota", instead="x", ServiceCode="ec2", QuotaCode="L-1")
    assert sig.failure.kind == "bad answer" and len(sent) == 1
    assert "retrying" not in capsys.readouterr().err


@pytest.fixture
def flaky_quotas(monkeypatch):
    """A Service Quotas endpoint that answers AWS's own 503 (a JSON error naming its code) ``n`` times, then the
    quota; or an HTML page when ``html`` is set."""
    import http.server
    import json
    import threading

    state = {"n": 1, "html": False, "seen": 0}

    class H(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state["seen"] += 1
            if state["html"]:
                code, ctype, body = 502, "text/html", b"<html><head><title>502 Bad Gateway</title></head></html>"
            elif state["seen"] <= state["n"]:
                body = json.dumps({"__type": "ServiceUnavailableException", "message": "try again"}).encode()
                code, ctype = 503, "application/x-amz-json-1.1"
            else:
                body = json.dumps({"Quota": {"QuotaCode": "L-1", "Value": 64.0}}).encode()
                code, ctype = 200, "application/x-amz-json-1.1"
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{srv.server_address[1]}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAPLAINMOTO0000001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "plain-moto-secret-key-not-real-000000000")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    yield state
    srv.shutdown()
    srv.server_close()


def test_awss_own_503_is_retried_and_each_retry_is_a_line(flaky_quotas, capsys):
    sq = aws_client.client(aws_client.session(R), "service-quotas", R)
    sent = _sends(sq)
    got = aws_client.essential_call(sq, "get_aws_default_service_quota", ServiceCode="ec2", QuotaCode="L-1")
    assert got["Quota"]["Value"] == 64.0 and len(sent) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(
        "AWS: servicequotas:GetAWSDefaultServiceQuota answered HTTP 503 ServiceUnavailableException; retrying in "
    ), err
    assert err[0].endswith(f"s (attempt 2 of {aws_client.MAX_ATTEMPTS + 1})")


def test_an_html_page_from_a_proxy_is_not_retried(flaky_quotas, capsys):
    flaky_quotas["html"] = True
    sq = aws_client.client(aws_client.session(R), "service-quotas", R)
    sent = _sends(sq)
    sig = aws_client.optional_call(sq, "get_aws_default_service_quota", instead="x", ServiceCode="ec2", QuotaCode="L-1")
    assert sig.failure.status == 502 and len(sent) == 1
    assert capsys.readouterr().err == ""
