"""A moto server for the aws target, for tests and headless notebook runs (test-only).

    from tests.fakes.aws.moto_env import moto_server     # with the repository on sys.path
    with moto_server() as srv:                            # ThreadedMotoServer on 127.0.0.1:<free port>
        srv.env                                           # the variables a subprocess / notebook kernel needs
        srv.fake                                          # moto_ext.FAKE: quotas, Spot scores, capacity...
        ... run notebooks with env=srv.env (papermill inherits os.environ, already set here)

While the block runs, ``os.environ`` carries ``AWS_ENDPOINT_URL`` (every boto3 client in this process and
its children talks to the server), fake credentials, a region, ``PATH`` with the fake ``eksctl`` (and an ``aws``
that answers only ``--version``, for the preflight) first,
``KUBECONFIG`` in a temporary directory, and ``FAKE_EKSCTL_LOG``. Everything is restored afterwards.
The operations moto lacks (EC2 Service Quotas, Spot placement scores, capacity reservations, scaling
activities) are added by :mod:`moto_ext` to moto's response classes - the server thread runs them, so a
kernel in another process sees them over HTTP; :func:`moto_ext.seed_defaults` gives the account quotas.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import free_port

from .. import helm as fake_helm
from . import moto_ext

FAKES_DIR = Path(__file__).resolve().parent
#: Recognisable fake credentials, so tests can assert they never appear in output.
FAKE_ACCESS_KEY = "AKIAFAKERAYTRAIN0001"
FAKE_SECRET_KEY = "fake/Secret+Key/raytrain-tutorial/NOT-A-REAL-KEY0"
FAKE_SESSION_TOKEN = "FakeSessionTokenRaytrainTutorial0123456789"


def _eksctl_shim_dir(work: Path) -> Path:
    """A folder holding ``eksctl``: the fake, run by this interpreter (the one with boto3), never by whichever
    ``python3`` comes first on PATH (a stock Debian's has no boto3)."""
    d = work / "bin"
    d.mkdir(exist_ok=True)
    exe = d / "eksctl"
    exe.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(FAKES_DIR / "eksctl"))} "$@"\n')
    exe.chmod(0o755)
    # the AWS CLI the preflight asks for: it answers `aws --version` as AWS CLI v2 does (the line eksctl itself
    # parses, `aws-cli/X.Y.Z ...`) and refuses anything else, so no test talks to AWS through it
    aws = d / "aws"
    version = "aws-cli/2.22.35 Python/3.12.6 Linux/6.8.0 exe/x86_64.ubuntu.24"
    aws.write_text(
        f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo "{version}"; exit 0; fi\n'
        'echo "fake aws CLI: only --version" >&2\nexit 2\n'
    )
    aws.chmod(0o755)
    # helm, which the preflight requires: the fake of tests/fakes/helm.py (version, and the pinned charts into
    # whichever cluster the kubeconfig names)
    fake_helm.install(d)
    return d


@dataclass
class MotoServer:
    endpoint: str
    env: dict[str, str]
    workdir: Path
    fake: moto_ext.FakeState = field(default_factory=lambda: moto_ext.FAKE)

    @property
    def eksctl_log(self) -> Path:
        return Path(self.env["FAKE_EKSCTL_LOG"])

    def eksctl_calls(self) -> list[dict]:
        if not self.eksctl_log.is_file():
            return []
        return [json.loads(line) for line in self.eksctl_log.read_text().splitlines() if line.strip()]

    def reset(self) -> None:
        """Forget every resource and seed (a fresh account)."""
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(self.endpoint + "/moto-api/reset", method="POST")).read()
        moto_ext.FAKE.reset()
        if self.eksctl_log.exists():
            self.eksctl_log.unlink()


@contextlib.contextmanager
def moto_server(*, region: str = "us-west-2", seed: bool = True, eksctl: bool = True) -> Iterator[MotoServer]:
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    moto_ext.install()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    tmp = tempfile.TemporaryDirectory(prefix="raytrain-moto-")
    work = Path(tmp.name)
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_KEY,
        "AWS_SESSION_TOKEN": FAKE_SESSION_TOKEN,
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
        "KUBECONFIG": str(work / "kubeconfig"),
        "FAKE_EKSCTL_LOG": str(work / "eksctl-calls.jsonl"),
        "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",  # faster EC2 backends; the tests need no AMIs
    }
    if eksctl:
        env["PATH"] = f"{_eksctl_shim_dir(work)}{os.pathsep}{os.environ.get('PATH', '')}"
    removed = (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_SECURITY_TOKEN",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    )
    saved = {k: os.environ.get(k) for k in (*env, *removed)}
    os.environ.update(env)
    for k in removed:
        os.environ.pop(k, None)
    # keep boto3 off any real config/credential files on this machine
    os.environ["AWS_CONFIG_FILE"] = str(work / "no-config")
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = str(work / "no-credentials")
    env["AWS_CONFIG_FILE"] = os.environ["AWS_CONFIG_FILE"]
    env["AWS_SHARED_CREDENTIALS_FILE"] = os.environ["AWS_SHARED_CREDENTIALS_FILE"]
    moto_ext.FAKE.reset()
    srv = MotoServer(endpoint=endpoint, env=dict(env), workdir=work)
    unpin = fake_helm.pin_fake_archives() if eksctl else None  # the fake helm's archives are not the publishers'
    try:
        if seed:
            moto_ext.seed_defaults()
        yield srv
    finally:
        if unpin:
            unpin()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        moto_ext.FAKE.reset()
        server.stop()
        tmp.cleanup()
