"""The digest an image tag points to now, asked of its registry over the OCI Distribution API, anonymously.

``GET https://<registry>/v2/<name>/manifests/<tag>`` with the manifest media types in ``Accept``; a registry that
wants a token answers 401 with ``WWW-Authenticate: Bearer realm="...",service="...",scope="..."``, and a GET of
the realm with those ``service`` and ``scope`` parameters returns JSON with ``token`` (or ``access_token``), sent
back as ``Authorization: Bearer`` (the Docker registry token authentication spec, distribution/distribution
``docs/spec/auth/token.md``; Amazon ECR Public serves anonymous pulls this way). The digest of a manifest is the
sha256 of its bytes (OCI image spec, descriptor ``digest``); the ``Docker-Content-Digest`` header, when present,
must agree.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.error
import urllib.parse
import urllib.request

ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
_REF = re.compile(r"^(?P<host>[^/]+\.[^/]+|localhost(:\d+)?|[^/]+:\d+)/(?P<name>[^:@]+):(?P<tag>[\w][\w.-]{0,127})$")


class RegistryError(RuntimeError):
    """The registry could not say what the tag points to (the message says why)."""


def split_reference(image: str) -> tuple[str, str, str]:
    """(registry host, repository name, tag) of ``HOST/NAME:TAG`` (a digest after it is dropped)."""
    m = _REF.match(image.split("@", 1)[0])
    if not m:
        raise RegistryError(f"{image!r} is not HOST/NAME:TAG")
    return m["host"], m["name"], m["tag"]


def _challenge(header: str) -> dict[str, str]:
    if not header.lower().startswith("bearer "):
        raise RegistryError(f"the registry asks for {header.split(' ', 1)[0]} authentication, not a bearer token")
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


def _token(header: str, timeout_s: float) -> str:
    params = _challenge(header)
    realm = params.pop("realm", "")
    if not realm.startswith(("https://", "http://")):
        raise RegistryError(f"the registry's token realm {realm!r} is not a URL")
    url = realm + ("&" if "?" in realm else "?") + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=timeout_s) as answer:
        body = json.loads(answer.read().decode())
    token = body.get("token") or body.get("access_token")
    if not token:
        raise RegistryError("the registry's token endpoint returned no token")
    return token


def manifest_digest(image: str, *, scheme: str = "https", timeout_s: float = 10.0) -> str:
    """``sha256:<64 hex>`` of the manifest (or index) ``image``'s tag points to now."""
    host, name, tag = split_reference(image)
    url = f"{scheme}://{host}/v2/{name}/manifests/{tag}"
    headers = {"Accept": ACCEPT}
    try:
        try:
            answer = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout_s)
        except urllib.error.HTTPError as e:
            if e.code != 401:
                raise
            headers["Authorization"] = f"Bearer {_token(e.headers.get('WWW-Authenticate', ''), timeout_s)}"
            answer = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout_s)
        with answer:
            body, said = answer.read(), answer.headers.get("Docker-Content-Digest", "")
    except urllib.error.HTTPError as e:
        raise RegistryError(f"{url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise RegistryError(f"{url}: {getattr(e, 'reason', e)}") from None
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    if said and said != digest:
        raise RegistryError(f"{url}: the registry says {said}, its manifest's bytes hash to {digest}")
    return digest


__all__ = ["ACCEPT", "RegistryError", "manifest_digest", "split_reference"]
