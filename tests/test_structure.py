"""The package's shape, checked with kept tools and the AST: layered imports (import-linter), ruff lint and format,
no function over 80 lines, no private name imported across modules, no text about how the work was organised."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "raytrain_helpers"
SOURCES = sorted(PKG.rglob("*.py"))
MAX_LINES = 80


def _tool(name: str) -> list[str]:
    exe = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if exe is None:
        pytest.fail(f"{name} is not installed: it is part of the test extra (pip install -e '.[test]')")
    return [exe]


def test_imports_point_down_only():
    """import-linter's contracts in pyproject.toml: layers (no back-edge, no cycle), and the worker stays apart."""
    r = subprocess.run([*_tool("lint-imports"), "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "BROKEN" not in r.stdout


def test_ruff_lint_and_format():
    targets = ["raytrain_helpers", "tests", "benchmarks", "notebooks/build.py"]
    lint = subprocess.run([*_tool("ruff"), "check", *targets], cwd=REPO, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout[-4000:]
    fmt = subprocess.run([*_tool("ruff"), "format", "--check", *targets], cwd=REPO, capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout[-4000:]


def _functions(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_function_over_80_lines():
    long = []
    for path in SOURCES:
        for fn in _functions(ast.parse(path.read_text())):
            n = fn.end_lineno - fn.lineno + 1
            if n > MAX_LINES:
                long.append(f"{path.relative_to(REPO)}:{fn.lineno} {fn.name} ({n} lines)")
    assert not long, long


def test_no_private_name_crosses_a_module():
    crossing = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("raytrain_helpers")):
                crossing += [
                    f"{path.relative_to(REPO)}:{node.lineno} {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = node.value
                if isinstance(base, ast.Name) and base.id in _imported_modules(path):
                    crossing.append(f"{path.relative_to(REPO)}:{node.lineno} {base.id}.{node.attr}")
    assert not crossing, crossing


def test_imports_inside_functions_only_defer_heavy_libraries():
    """A module of the package is imported at the top of its importer: an import inside a function is there only to
    defer a heavy third-party library (torch, matplotlib, boto3, kubernetes...), never to dodge a cycle."""
    deferred = []
    for path in SOURCES:
        for fn in _functions(ast.parse(path.read_text())):
            for node in ast.walk(fn):
                own = isinstance(node, ast.ImportFrom) and (
                    node.level or (node.module or "").startswith("raytrain_helpers")
                )
                own = own or (
                    isinstance(node, ast.Import) and any(a.name.startswith("raytrain_helpers") for a in node.names)
                )
                if own:
                    deferred.append(f"{path.relative_to(REPO)}:{node.lineno} in {fn.name}")
    assert not deferred, deferred


def _imported_modules(path: Path, cache: dict = {}) -> set[str]:  # noqa: B006 - a per-run cache
    if path not in cache:
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("raytrain_helpers")):
                names |= {
                    a.asname or a.name
                    for a in node.names
                    if (PKG / (a.name + ".py")).exists() or any(p.stem == a.name for p in SOURCES)
                }
        cache[path] = names
    return cache[path]


def test_no_one_letter_module_aliases():
    short = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                short += [
                    f"{path.relative_to(REPO)}:{node.lineno} as {a.asname}"
                    for a in node.names
                    if a.asname and len(a.asname) == 1
                ]
    assert not short, short


HISTORY = re.compile(r"\bissue\s*#?\d+\b|\bthe lead\b|another issue|has not delivered|\btransition shim\b", re.I)


@pytest.mark.parametrize("folder", ["raytrain_helpers", "notebooks", "manifests"])
def test_product_text_speaks_of_the_product(folder):
    hits = []
    for path in sorted((REPO / folder).rglob("*")):
        if path.is_file() and path.suffix in (".py", ".ipynb", ".j2", ".yaml", ".md"):
            for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if HISTORY.search(line):
                    hits.append(f"{path.relative_to(REPO)}:{i}: {line.strip()[:100]}")
    assert not hits, hits


#: The names ``settings.target`` takes (``targets.NAMES``), spelt out so that this file imports nothing of the package.
TARGET_NAMES = ("local", "aws")


def _names_a_target(node: ast.AST) -> bool:
    """A target's name in an expression: ``x.NAME``, ``target_name(...)``, ``x.target``, or the literal ``"aws"`` /
    ``"local"`` (alone or in a tuple, list or set)."""
    if isinstance(node, ast.Attribute) and node.attr in ("NAME", "target"):
        return True
    if isinstance(node, ast.Call):
        func = node.func
        return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)) == "target_name"
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_target(e) for e in node.elts)
    return isinstance(node, ast.Constant) and node.value in TARGET_NAMES


def _target_branches(tree: ast.AST) -> list[int]:
    """Lines comparing a target's name (``==``, ``!=``, ``in``...), or picking from a dict keyed by the names."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(_names_a_target(n) for n in [node.left, *node.comparators]):
            lines.append(node.lineno)
        if isinstance(node, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value in TARGET_NAMES for k in node.keys
        ):
            lines.append(node.lineno)
    return lines


def test_no_branch_on_the_target_name_outside_targets():
    """What differs between the targets is an attribute or a function of the Target interface (targets/base.py):
    outside raytrain_helpers/targets/ no code compares a target's name, whichever way it reached it."""
    branches = [
        f"{path.relative_to(REPO)}:{line}"
        for path in SOURCES
        if "targets" not in path.relative_to(PKG).parts[:1]
        for line in _target_branches(ast.parse(path.read_text()))
    ]
    assert not branches, branches


def test_the_target_branch_check_sees_each_spelling():
    spellings = [
        'if for_settings(settings).NAME == "local": pass',
        'x = target.NAME != "aws"',
        'on_aws = target_name(settings) == "aws"',
        'if present.target_name(s) in ("local",): pass',
        "if settings.target == t: pass",
        'if name == "aws": pass',
        'run = {"local": a, "aws": b}[name]',
    ]
    for code in spellings:
        assert _target_branches(ast.parse(code)) == [1], code
    assert _target_branches(ast.parse('if args.action == "down" and target.NODEGROUP_ONLY_DOWN: pass')) == []


#: No module of the package over this many lines: a reader finds what they look for in one screenful of names.
MAX_MODULE_LINES = 600


def test_no_module_over_600_lines():
    sizes = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in SOURCES}
    over = {name for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not over, sorted(f"{name} ({sizes[name]} lines)" for name in over)


def test_the_step_actions_are_defined_once():
    """``plan``/``up``/``status``/``down`` are spelt out in core/constants.py (STEP_ACTIONS) alone; every other
    place imports it or derives its subset from it."""
    spelt = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
                if len(words) >= 3 and set(words) <= {"plan", "up", "status", "down"}:
                    spelt.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert [s.split(":")[0] for s in spelt] == ["raytrain_helpers/core/constants.py"], spelt


#: The aws target's folders, each one step of the tutorial (what the layers contract in pyproject.toml orders).
AWS = PKG / "targets" / "aws"


def test_the_aws_target_is_one_folder_per_step_each_naming_its_notebook():
    """Every folder of targets/aws opens with what that step does on aws and which notebook (or ``handout``) calls
    it; only the target's door and what every step shares sit beside them; the import-linter contract names them
    all, so a new folder is placed in the order on purpose."""
    folders = sorted(p.parent.name for p in AWS.glob("*/__init__.py"))
    assert folders == ["eks", "jobs", "kuberay", "placement", "plugins", "storage", "workshop"]
    for name in folders:
        doc = ast.get_docstring(ast.parse((AWS / name / "__init__.py").read_text())) or ""
        assert re.search(r"notebooks? 0[1-8]|handout", doc), f"targets/aws/{name}/__init__.py names no notebook"
    loose = sorted(p.stem for p in AWS.glob("*.py") if p.stem != "__init__")
    assert loose == ["cluster_check", "commands", "common", "equivalents", "gate", "ownership", "parts", "preflight"]
    layers = (REPO / "pyproject.toml").read_text().split('containers = ["raytrain_helpers.targets.aws"]')[0]
    layers = layers.rsplit("layers = [", 1)[1]
    assert sorted(re.findall(r"[a-z_]+", layers)) == sorted(folders + loose)
