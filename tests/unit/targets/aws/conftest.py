"""The aws fakes' fixtures for every test here: moto in-process (mocked_aws), or a moto server (moto_srv, srv).
Every run's folder is a temporary one (tests/unit/conftest.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

from tests.fakes.aws.fixtures import mocked_aws, moto_srv, srv  # noqa: E402,F401
