"""The repository stands alone: a clone needs no folder beside it, every file the tests read is shipped (with its
source, version and licence), and no test skips because a file is missing."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Reading or naming the folder ``shared`` beside the repository (one level up) or the machine's copy of it: a clone of
#: this repository has neither. (``../shared-cluster.yaml``, a hand-out's file name, is not such a folder.)
BESIDE = re.compile(
    r"\.\./shared(?![\w-])"
    r"|\.parents?(?:\[\d+\])?\s*/\s*[\"']shared[\"']"
    r"|\.parents?(?:\[\d+\])?\.joinpath\(\s*[\"']shared[\"']"
    r"|/work/shared\b"
)
#: Files that still look beside the repository, each with what it looks for there. An entry whose file no longer
#: does fails the test below, so the list only shrinks.
STILL_LOOKS_BESIDE: dict[str, str] = {}


def _files() -> list[str]:
    """Every file of the repository: tracked, and new ones git does not ignore."""
    r = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, f"git ls-files failed in {REPO}: {r.stderr}"
    return sorted({f for f in r.stdout.split("\0") if f and (REPO / f).is_file()})


def _hits(names: list[str]) -> dict[str, list[str]]:
    hits: dict[str, list[str]] = {}
    for name in names:
        text = (REPO / name).read_bytes().decode("utf-8", errors="replace")
        found = [f"{i}: {line.strip()[:120]}" for i, line in enumerate(text.splitlines(), 1) if BESIDE.search(line)]
        if found:
            hits[name] = found
    return hits


def test_nothing_reads_or_names_a_folder_beside_the_repository():
    """Code, tests, docs, data: no file reads or names the ``shared`` folder beside the repository (the committed
    notebooks: the next test)."""
    own = str(Path(__file__).relative_to(REPO))  # spells the names it looks for
    hits = _hits([f for f in _files() if not f.endswith(".ipynb") and f != own])
    stale = sorted(set(STILL_LOOKS_BESIDE) - set(hits))
    assert not stale, f"no longer look beside the repository, take them out of STILL_LOOKS_BESIDE: {stale}"
    hits = {k: v for k, v in hits.items() if k not in STILL_LOOKS_BESIDE}
    assert not hits, json.dumps(hits, indent=1, ensure_ascii=False)


def test_the_notebooks_outputs_name_no_folder_beside_the_repository():
    """The committed notebooks, outputs included: what the package prints into them names nothing beside it."""
    notebooks = [f for f in _files() if f.endswith(".ipynb")]
    assert notebooks
    hits = _hits(notebooks)
    assert not hits, json.dumps(hits, indent=1, ensure_ascii=False)


def test_the_folder_check_sees_each_spelling():
    beside = "../" + "shared"  # spelt in two pieces, so this file is not a hit of the repository-wide greps
    named = [
        f'CRD_ROOT = REPO / "{beside}/kuberay-crds"',
        f"see ``{beside}/perf/fsdp_probe.py``",
        f"bash {beside}/offline-gpu/make_bundle.sh .bundle",
        'SHARED = REPO.parent / "' + 'shared"',
        "p = Path(__file__).resolve().parents[3].parent / 'shared' / 'x'",
        'root.parents[1] / "shared"',
        'REPO.parent.joinpath("shared", "x")',
        "cp /work/shared/perf/fsdp_probe.py .",
    ]
    for line in named:
        assert BESIDE.search(line), line
    for line in [
        "quotas: `kubectl apply -f ../shared-cluster.yaml`",
        "aws.shared_cluster: true",
        '"shared" in settings.aws',
        "the shared/ folder",
    ]:
        assert not BESIDE.search(line), line


# --------------------------------------------------------------------------------------------------------------
# What the repository ships in place of that folder, each file as its README describes it
# --------------------------------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_schemas_are_the_files_their_readme_describes():
    """schemas/README.md: one row per file with publisher, version, source, licence and date; its sha256."""
    readme = (REPO / "schemas" / "README.md").read_text()
    shipped = sorted(str(p.relative_to(REPO / "schemas")) for p in (REPO / "schemas").glob("*/v*/*") if p.is_file())
    assert shipped, "schemas/ ships no schema"
    sums = dict(re.findall(r"^\| `([^`]+)` \| `([0-9a-f]{64})` \|$", readme, re.M))
    assert sorted(sums) == shipped, (sorted(sums), shipped)
    header = next(ln for ln in readme.splitlines() if ln.startswith("| file | what |"))
    assert all(word in header for word in ("publisher, version", "taken from", "licence", "retrieved")), header
    for name, digest in sums.items():
        (row,) = [ln for ln in readme.splitlines() if ln.startswith(f"| `{name}` | ") and ln.count("|") > 5]
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert all(cells) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", cells[-1]) and "Apache-2.0" in cells[-2], row
        assert _sha256(REPO / "schemas" / name) == digest, f"schemas/{name} differs from schemas/README.md"
    for publisher in {name.split("/")[0] for name in shipped}:
        assert "Apache License" in (REPO / "schemas" / publisher / "LICENSE").read_text(), publisher


def test_the_yardstick_is_the_file_its_readme_describes():
    folder = REPO / "benchmarks" / "yardstick"
    (digest,) = re.findall(r"^\| sha256 \| `([0-9a-f]{64})` \|$", (folder / "README.md").read_text(), re.M)
    assert _sha256(folder / "fsdp_probe.py") == digest, "benchmarks/yardstick/fsdp_probe.py differs from its README"


def test_the_captured_nccl_logs_say_where_they_come_from():
    folder = REPO / "raytrain_helpers" / "nccl" / "captured"
    meta = json.loads((folder / "captured.json").read_text())
    assert {"what", "where", "how", "source", "refresh"} <= set(meta) and "Apache-2.0" in meta["source"]
    assert sorted(r["file"] for r in meta["runs"]) == sorted(p.name for p in folder.glob("*.log"))


# --------------------------------------------------------------------------------------------------------------
# No test skips for a missing file
# --------------------------------------------------------------------------------------------------------------

#: Checks of the file system: a test guarded by one of these skips where a file is missing.
FILE_CHECKS = {"exists", "is_file", "is_dir", "isfile", "isdir", "glob", "iterdir"}


def _checks_a_file(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in FILE_CHECKS
        for n in ast.walk(node)
    )


def _is_skip(node: ast.AST) -> bool:
    """``pytest.skip(...)``, ``pytest.mark.skipif(...)`` or ``pytest.importorskip(...)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("skip", "skipif", "importorskip")
    )


def file_guarded_skips(tree: ast.AST) -> list[int]:
    """Lines of skips that depend on whether a file is there: a skip under an ``if`` that checks the file system,
    or a ``skipif`` whose condition does."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _checks_a_file(node.test):
            lines += [n.lineno for stmt in node.body for n in ast.walk(stmt) if _is_skip(n)]
        if _is_skip(node) and getattr(node.func, "attr", "") == "skipif" and node.args and _checks_a_file(node.args[0]):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_no_test_skips_for_a_missing_file():
    """A file a test reads is shipped with the repository (or made by the test): where it is missing the test
    fails. tests/conftest.py also turns a skip whose reason names a path of the repository into a failure."""
    hits = [
        f"{path.relative_to(REPO)}:{line}"
        for path in sorted((REPO / "tests").rglob("*.py"))
        for line in file_guarded_skips(ast.parse(path.read_text()))
    ]
    assert not hits, hits


def test_the_skip_check_sees_each_spelling():
    guarded = [
        "if not d.is_dir():\n    pytest.skip('CRDs not found')",
        "if not SCHEMA.is_file():\n    pytest.skip(f'not found at {SCHEMA}')",
        "if not os.path.exists(p):\n    import pytest\n    pytest.skip('absent')",
        "@pytest.mark.skipif(not (REPO / 'x').exists(), reason='no x')\ndef test(): pass",
        "if not any(d.glob('*.yaml')):\n    pytest.skip('none')",
    ]
    for code in guarded:
        assert file_guarded_skips(ast.parse(code)), code
    for code in [
        "if not missing():\n    pytest.skip('playwright')",
        "torch = pytest.importorskip('torch')",
        "if d.is_dir():\n    x = 1",
    ]:
        assert not file_guarded_skips(ast.parse(code)), code


def test_a_skip_naming_a_file_of_the_repository_fails(tmp_path):
    """The hooks in tests/conftest.py, run by pytest on a small suite: a skip whose reason names a path in or
    beside the repository is a failure (at run time and at collection), another skip stays a skip."""
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401\n"
    )
    gone = REPO / "schemas" / "gone.json"
    (tmp_path / "test_run.py").write_text(
        "import pytest\n\n"
        f"def test_missing_schema():\n    pytest.skip('schema not found at {gone}')\n\n"
        "def test_missing_tool():\n    pytest.skip('/usr/bin/chromium is absent: apt-get install -y chromium')\n"
    )
    (tmp_path / "test_collect.py").write_text(
        f"import pytest\n\npytest.skip('{REPO.parent / 'shared'} is absent', allow_module_level=True)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-q",
            "-rs",
            "--continue-on-collection-errors",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    summary = r.stdout.strip().splitlines()[-1]
    assert "1 failed" in summary and "1 skipped" in summary and "1 error" in summary, r.stdout[-3000:]
    assert r.stdout.count("skipped for a missing file of the repository") >= 2, r.stdout[-3000:]
    assert "chromium is absent" in r.stdout
