"""No credentials or tokens in what the tutorial publishes: every committed notebook (sources and outputs) and
the outputs of test and tutorial runs (``runs/``, ``RAYTRAIN_RUNS_DIR``), scanned with detect-secrets.

detect-secrets' own detectors (AWS keys, private keys, JWTs, GitHub/Slack/... tokens, ``password = ...``) run on
the text of each notebook (cell sources and text outputs; base64 images are left out). Three are off: the two
high-entropy ones (Ray's job, actor and node ids in the logs are random hex) and the public-IP one (Ray's logs
print the node's address, which is no credential). A rule of ours catches Ray auth
tokens (``secrets.token_hex(32)``: 64 hex digits), alone or after ``RAY_AUTH_TOKEN`` / ``Bearer``.
"""

from __future__ import annotations

import json
import os
import random
import re
import string
from pathlib import Path

import pytest

pytest.importorskip("detect_secrets", reason="detect-secrets is in the test extra: pip install -e '.[test]'")

from detect_secrets import SecretsCollection  # noqa: E402
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class  # noqa: E402
from detect_secrets.plugins.base import RegexBasedDetector  # noqa: E402
from detect_secrets.settings import transient_settings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: off: random ids in Ray logs look high-entropy; Ray logs print the node address (not a credential)
OFF = {"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"}
RUN_SUFFIXES = {".ipynb", ".json", ".log", ".txt", ".out", ".err", ".yaml", ".md"}


class RayAuthTokenDetector(RegexBasedDetector):
    """A Ray auth token: 64 hex digits (``secrets.token_hex(32)``), alone or after RAY_AUTH_TOKEN / Bearer."""

    secret_type = "Ray auth token"
    denylist = (
        re.compile(r"RAY_AUTH_TOKEN['\"]?\s*[=:]\s*['\"]?([0-9A-Za-z_\-]{16,})"),
        re.compile(r"[Bb]earer\s+([0-9A-Za-z_\-.]{16,})"),
        # not a chart archive's published sha256 in a `sha256sum -c` line (03 shows the pinned digests it checks)
        re.compile(r"(?<![0-9a-fA-F])([0-9a-f]{64})(?![0-9a-fA-F])(?!\s+[\w.-]+\.tgz\b)"),
    )


def notebook_text(path: Path) -> str:
    """A notebook's cell sources and text outputs, one line per line (images and other binary data left out)."""
    nb = json.loads(path.read_text())
    parts: list[str] = []
    for cell in nb.get("cells", []):
        parts.append("".join(cell.get("source", "")))
        for out in cell.get("outputs", []):
            parts.append("".join(out.get("text", "")))
            parts.extend(f"{out.get('ename', '')}: {out.get('evalue', '')}".splitlines())
            parts.extend(re.sub(r"\x1b\[[0-9;]*m", "", line) for line in out.get("traceback", []))
            for mime, data in out.get("data", {}).items():
                if mime.startswith("text/") or mime == "application/json":
                    parts.append(data if isinstance(data, str) else "".join(data) if isinstance(data, list) else "")
    return "\n".join(parts)


#: Ray's own ids, labelled as such in its log lines (a raylet's "worker died" line names a 64-hex "Lease ID"): masked
#: before the scan, whose "bare 64 hex digits" rule would take them for a token (detect-secrets also scans the value
#: of a "key: value" line alone, so the label cannot be asked for in the rule itself).
RAY_ID = re.compile(r"\b((?:Lease|Worker|Node|Job|Actor|Task) ID: )[0-9a-f]{16,64}\b")


def scan(files: dict[str, str], workdir: Path) -> list[str]:
    """detect-secrets over ``{name: text}``: one ``name:line: type`` per finding (the secret itself never shown)."""
    builtin = {cls.__name__ for cls in get_mapping_from_secret_type_to_class().values()} - OFF
    plugins = [{"name": name} for name in sorted(builtin - {RayAuthTokenDetector.__name__})]
    plugins.append({"name": RayAuthTokenDetector.__name__, "path": f"file://{Path(__file__).resolve()}"})
    findings: list[str] = []
    with transient_settings({"plugins_used": plugins, "filters_used": []}):
        get_mapping_from_secret_type_to_class.cache_clear()  # take in the plugin of this file
        for i, (name, text) in enumerate(files.items()):
            copy = workdir / f"{i}.txt"
            copy.write_text(RAY_ID.sub(r"\1<ray id>", text))
            found = SecretsCollection()
            found.scan_file(str(copy))
            findings += [f"{name}:{s.line_number}: {s.type}" for _, s in found]
    return findings


def published_files() -> dict[str, str]:
    """The committed notebooks and every run output there is, by name."""
    files = {str(p.relative_to(REPO)): notebook_text(p) for p in sorted((REPO / "notebooks").glob("*.ipynb"))}
    roots = [REPO / "runs"] + ([Path(os.environ["RAYTRAIN_RUNS_DIR"])] if os.environ.get("RAYTRAIN_RUNS_DIR") else [])
    for root in roots:
        for p in sorted(root.rglob("*")) if root.is_dir() else []:
            if p.is_file() and p.suffix in RUN_SUFFIXES and p.stat().st_size < 20_000_000:
                files[str(p)] = notebook_text(p) if p.suffix == ".ipynb" else p.read_text(errors="replace")
    return files


def test_no_secrets_in_notebooks_or_run_outputs(tmp_path):
    files = published_files()
    assert len([n for n in files if n.startswith("notebooks/")]) >= 8
    findings = scan(files, tmp_path)
    assert not findings, "credentials or tokens found (remove them, re-execute the notebook):\n" + "\n".join(findings)


def _fake_aws_key(rng: random.Random) -> tuple[str, str]:
    return "AKIA" + "".join(rng.choices(string.ascii_uppercase + "234567", k=16)), "".join(
        rng.choices(string.ascii_letters + string.digits + "+/", k=40)
    )


@pytest.mark.parametrize("where", ["stream", "traceback"])
def test_a_planted_aws_key_and_ray_token_are_found(tmp_path, where):
    """The scan fails when a notebook output holds a key or a token (a copy of a committed notebook)."""
    rng = random.Random(7)
    key_id, secret = _fake_aws_key(rng)
    token = "".join(rng.choices("0123456789abcdef", k=64))
    nb = json.loads((REPO / "notebooks" / "05_train.ipynb").read_text())
    planted = [f"aws_access_key_id = {key_id}\n", f"aws_secret_access_key = {secret}\n", f"RAY_AUTH_TOKEN={token}\n"]
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code")
    if where == "stream":
        cell.setdefault("outputs", []).append({"output_type": "stream", "name": "stdout", "text": planted})
    else:
        cell.setdefault("outputs", []).append(
            {"output_type": "error", "ename": "RuntimeError", "evalue": "x", "traceback": [p.strip() for p in planted]}
        )
    path = tmp_path / "05_train.ipynb"
    path.write_text(json.dumps(nb))
    types = {f.split(": ", 1)[1] for f in scan({"05_train.ipynb": notebook_text(path)}, tmp_path)}
    assert {"AWS Access Key", "Ray auth token"} <= types, types
    assert not scan({"05_train.ipynb": notebook_text(REPO / "notebooks" / "05_train.ipynb")}, tmp_path)


def test_a_bare_token_is_found_and_a_ray_lease_id_is_not(tmp_path):
    """The raylet's line for a killed worker names a 64-hex lease id (seen in the fault test's job log): not a
    token. The same 64 hex digits alone on a line are."""
    hexes = "".join(random.Random(3).choices("0123456789abcdef", k=64))
    died = f"(raylet) A worker died or was killed while executing a task. Lease ID: {hexes} Worker ID: 1a2b"
    assert scan({"job.log": died}, tmp_path) == []
    assert scan({"job.log": f"token {hexes}"}, tmp_path) == ["job.log:1: Ray auth token"]
