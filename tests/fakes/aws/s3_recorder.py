"""A moto S3 server that records every HTTP request it answers (test-only).

    from tests.fakes.aws.s3_recorder import recording_s3
    with recording_s3() as rec:               # moto's own WSGI app on 127.0.0.1:<free port>, in a thread
        rec.endpoint                          # http://127.0.0.1:PORT (endpoint_override, AWS_ENDPOINT_URL_S3)
        ... pyarrow / boto3 / a subprocess talk to it ...
        rec.requests                          # [S3Request(method, bucket, key, query, status, delete_keys), ...]

It serves moto's own application (``moto.moto_server.werkzeug_app.DomainDispatcherApplication``, what
``ThreadedMotoServer`` serves), wrapped in a WSGI layer that notes each request's method, path (path-style
addressing: ``/bucket/key``, which pyarrow uses with an endpoint override), query, the status answered and,
for a multi-object delete (``POST /bucket?delete``), the keys named in its XML body. :mod:`moto_ext` is
installed first (pyarrow needs S3's ``CompleteMultipartUploadResult`` root element).
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field

from raytrain_helpers.plan.s3_access import S3Request
from tests.helpers import free_port

from . import moto_ext


def _delete_keys(body: bytes) -> tuple[str, ...]:
    root = ET.fromstring(body)
    return tuple(el.text or "" for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "Key")


@dataclass
class Recording:
    endpoint: str
    requests: list[S3Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self) -> list[S3Request]:
        """The requests so far, and forget them."""
        with self.lock:
            out, self.requests[:] = list(self.requests), []
        return out


def _recorder(app, rec: Recording):
    def wsgi(environ, start_response):
        query = tuple(urllib.parse.parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        body = b""
        if environ["REQUEST_METHOD"] == "POST" and "delete" in dict(query):  # only here: uploads may be chunked
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
        status: list[int] = []

        def start(code, headers, *exc):
            status.append(int(code.split()[0]))
            return start_response(code, headers, *exc)

        out = list(app(environ, start))
        bucket, _, key = urllib.parse.unquote(environ.get("PATH_INFO", "")).lstrip("/").partition("/")
        deleted = _delete_keys(body) if body else ()
        with rec.lock:
            rec.requests.append(
                S3Request(environ["REQUEST_METHOD"], bucket, key, query, status[0] if status else 0, deleted)
            )
        return out

    return wsgi


@contextlib.contextmanager
def recording_s3() -> Iterator[Recording]:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    moto_ext.install()
    port = free_port()
    rec = Recording(f"http://127.0.0.1:{port}")
    server = make_server("127.0.0.1", port, _recorder(DomainDispatcherApplication(create_backend_app), rec), True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield rec
    finally:  # moto's backends are this process's: forget the buckets made here, as moto_env's reset does
        urllib.request.urlopen(urllib.request.Request(rec.endpoint + "/moto-api/reset", method="POST")).read()
        server.shutdown()
        thread.join()
