"""clients.registry and the preflight's image row: the digest a tag points to, read as a registry serves it.

The fake registry does what the Docker registry token authentication spec (distribution/distribution
docs/spec/auth/token.md) and the OCI Distribution spec say a registry does, and what Amazon ECR Public does for an
anonymous pull: 401 with a Bearer challenge, a token from the realm for that service and scope, then the manifest
with ``Docker-Content-Digest``."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from raytrain_helpers.clients import registry
from raytrain_helpers.core.config import with_overrides
from raytrain_helpers.targets.aws.preflight import image_row
from tests.helpers import aws_settings

MANIFEST = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []})
BODY = MANIFEST.encode()
DIGEST = "sha256:" + hashlib.sha256(BODY).hexdigest()
NAME, TAG = "deep-learning-containers/ray", "train-ml-cuda-v1.1"


@pytest.fixture
def fake_registry():
    state = {"said": DIGEST, "asked": []}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            url = urlparse(self.path)
            state["asked"].append(url.path)
            if url.path == "/token/":
                q = parse_qs(url.query)
                ok = q.get("service") == ["public.ecr.aws"] and q.get("scope") == ["aws"]
                return self._send(200 if ok else 400, json.dumps({"token": "T"} if ok else {}).encode())
            if url.path != f"/v2/{NAME}/manifests/{TAG}":
                return self._send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')
            if self.headers.get("Authorization") != "Bearer T":
                realm = f"http://127.0.0.1:{self.server.server_port}/token/"
                challenge = f'Bearer realm="{realm}",service="public.ecr.aws",scope="aws"'
                return self._send(401, b"{}", {"WWW-Authenticate": challenge})
            assert "application/vnd.oci.image.index.v1+json" in self.headers.get("Accept", "")
            self._send(200, BODY, {"Docker-Content-Digest": state["said"]})

        def _send(self, code, body, headers=None):
            self.send_response(code)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state["host"] = f"127.0.0.1:{server.server_port}"
    yield state
    server.shutdown()
    server.server_close()


def test_the_digest_of_a_tag_through_the_token_challenge(fake_registry):
    image = f"{fake_registry['host']}/{NAME}:{TAG}"
    assert registry.manifest_digest(image, scheme="http") == DIGEST
    assert fake_registry["asked"] == [f"/v2/{NAME}/manifests/{TAG}", "/token/", f"/v2/{NAME}/manifests/{TAG}"]


def test_a_header_that_disagrees_with_the_bytes_or_an_unknown_tag_is_an_error(fake_registry):
    fake_registry["said"] = "sha256:" + "0" * 64
    with pytest.raises(registry.RegistryError, match="hash to"):
        registry.manifest_digest(f"{fake_registry['host']}/{NAME}:{TAG}", scheme="http")
    with pytest.raises(registry.RegistryError, match="404"):
        registry.manifest_digest(f"{fake_registry['host']}/{NAME}:nope", scheme="http")


def test_the_preflight_prints_the_digest_to_pin_and_says_when_it_is_pinned(fake_registry):
    s = aws_settings()
    assert "@sha256:" not in s.versions.dlc_image  # no published digest: the default is the tag (docs/pins.md)
    row = image_row(s, lambda image: registry.manifest_digest(
        image.replace("public.ecr.aws", fake_registry["host"]), scheme="http"))  # fmt: skip
    assert row.status == "unknown" and not row.required and DIGEST in row.found
    assert f"{s.versions.dlc_image}@{DIGEST}" in row.fix
    pinned = with_overrides(s, dlc_image=f"{s.versions.dlc_image}@{DIGEST}")
    row = image_row(pinned, lambda image: pytest.fail("a pinned image is not looked up"))
    assert row.status == "ok" and DIGEST in row.found

    def unreachable(image):
        raise registry.RegistryError("no network")

    row = image_row(s, unreachable)
    assert row.status == "unknown" and "no network" in row.found and not row.required
