"""Bad input, one table: each case is an input (files, environment, a command line) -> the exit code -> what the
message must say (the field and the fix). After every case nothing was created or changed: the working folder
holds exactly what the case put there, and no run folder exists. The CLI runs in-process
(``raytrain_helpers.cli.main``)."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from raytrain_helpers.cli import main

REPO = Path(__file__).resolve().parents[1]
NCCL_LOG = REPO / "tests" / "fixtures" / "nccl" / "h200x2-raytrain-train-p2p.log"
#: A local cluster nobody runs: ports and temp root of their own (moved by TUTORIAL_TEST_PORT_OFFSET like the rest).
_OFFSET = int(os.environ.get("TUTORIAL_TEST_PORT_OFFSET", "0"))
NO_CLUSTER = ["-p", "gcs_port", str(6421 + _OFFSET), "-p", "dashboard_port", str(8321 + _OFFSET)]
NO_CLUSTER += ["-p", "temp_root", f"/tmp/rt-bad-input{_OFFSET}"]
FIX = "Fix"


@dataclass
class Case:
    id: str
    argv: list[str]
    rc: int
    says: tuple[str, ...]
    #: files of the working folder before the command: name -> text or bytes (a name ending in / is a folder)
    files: dict[str, str | bytes] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


def env_case(id: str, yaml: str | bytes, *says: str, rc: int = 2) -> Case:
    return Case(id, ["config", "--env-file", "{w}/env.yaml"], rc, says, files={"env.yaml": yaml})


def p_case(id: str, name: str, value: str, *says: str, rc: int = 2) -> Case:
    return Case(id, ["config", "--env-file", "{w}/env.yaml", "-p", name, value], rc, says, files={"env.yaml": ""})


def audit_case(id: str, content: str | bytes | None, *says: str, rc: int = 2) -> Case:
    files = {} if content is None else {"log": content}
    return Case(id, ["audit", "{w}/log", "--env-file", "{w}/env.yaml"], rc, says, files={"env.yaml": "", **files})


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


CASES = [
    # --- the settings file ------------------------------------------------------------------------------------
    Case("env-file-missing", ["config", "--env-file", "{w}/env.yaml"], 2, ("does not exist", "--env-file", FIX)),
    Case(
        "env-file-var-missing",
        ["config"],
        2,
        ("does not exist", "RAYTRAIN_ENV_FILE", FIX),
        env={"RAYTRAIN_ENV_FILE": "{w}/x.yaml"},
    ),
    Case("env-file-is-a-folder", ["config", "--env-file", "{w}/sub"], 2, ("is a folder", FIX), files={"sub/": ""}),
    env_case("env-empty-means-defaults", "", "steps: 8", rc=0),
    env_case("yaml-unclosed-list", "train:\n  steps: [8\n", "not valid YAML", "line", FIX),
    env_case("yaml-tab-indent", "train:\n\tsteps: 8\n", "not valid YAML", "line 2", FIX),
    env_case("yaml-top-level-list", "- steps\n- 8\n", "expected a mapping", FIX),
    env_case("yaml-binary", b"\xff\xfe\x00\x01binary", "not a text file", FIX),
    env_case("group-not-a-mapping", "train: 5\n", "train must be a mapping", FIX),
    env_case("int-given-text", "train:\n  steps: abc\n", "train.steps (STEPS)", "Fix: a whole number"),
    env_case("int-given-bool", "train:\n  steps: true\n", "train.steps (STEPS)", "Fix: a whole number"),
    env_case("int-given-fraction", "train:\n  steps: 2.5\n", "train.steps (STEPS)", "Fix: a whole number"),
    env_case("float-given-text", "train:\n  learning_rate: fast\n", "train.learning_rate", "Fix: a number"),
    env_case("list-given-text", "train:\n  extra_pip: torch\n", "train.extra_pip", "Fix: a list"),
    env_case("mapping-given-list", "nccl:\n  env: [NCCL_DEBUG]\n", "nccl.env", "Fix: a mapping"),
    env_case("name-given-number", "aws:\n  cluster_name: 123\n", "aws.cluster_name", FIX),
    env_case("version-unquoted", "aws:\n  k8s_version: 1.30\n", "aws.k8s_version", "quote it", FIX),
    env_case("unknown-key", "stepz: 3\n", "unknown setting 'stepz'", "did you mean steps", FIX),
    env_case("unknown-key-in-group", "train:\n  stepz: 3\n", "train.stepz", "did you mean train.steps", FIX),
    env_case("unknown-group", "trian:\n  steps: 3\n", "unknown setting 'trian'", FIX),
    env_case(
        "too-many-worker-nodes", "local:\n  worker_nodes: 99\n", "local.worker_nodes", "less than or equal to 16", FIX
    ),
    env_case("privileged-port", "local:\n  gcs_port: 80\n", "local.gcs_port", "1024", FIX),
    env_case("learning-rate-above-1", "train:\n  learning_rate: 5\n", "train.learning_rate", FIX),
    env_case("negative-seed", "train:\n  seed: -1\n", "train.seed", FIX),
    env_case("same-ports", "local:\n  gcs_port: 7000\n  dashboard_port: 7000\n", "gcs_port and dashboard_port", FIX),
    env_case("non-ascii-run-name", "run_name: tütorial\n", "run_name", "Fix: e.g. 'tutorial'"),
    env_case("non-ascii-cluster-name", "aws:\n  cluster_name: clüster\n", "aws.cluster_name", FIX),
    env_case("non-ascii-key", "stëps: 3\n", "unknown setting 'stëps'", FIX),
    env_case(
        "namespace-not-dns", "kubernetes:\n  namespace: Ray_Train\n", "kubernetes.namespace", "Fix: e.g. 'ray-train'"
    ),
    env_case("region-does-not-exist", "aws:\n  region: us-west-9\n", "aws.region", "Fix: e.g. us-west-2"),
    env_case("region-malformed", "aws:\n  region: Oregon\n", "aws.region", FIX),
    env_case("instance-type-does-not-exist", "aws:\n  gpu_node_type: p9.mega\n", "gpu_node_type 'p9.mega'", FIX),
    env_case(
        "gpus-per-node-mismatch",
        "aws:\n  gpu_node_type: p5.48xlarge\n",
        "gpus_per_node = 4",
        "Fix: set gpus_per_node: 8",
    ),
    Case(
        "override-file-missing",
        ["config", "--env-file", "{w}/env.yaml", "-f", "{w}/extra.yaml"],
        2,
        ("extra.yaml (-f) does not exist", FIX),
        files={"env.yaml": ""},
    ),
    Case(
        "override-file-invalid",
        ["config", "--env-file", "{w}/env.yaml", "-f", "{w}/extra.yaml"],
        2,
        ("extra.yaml", "not valid YAML", FIX),
        files={"env.yaml": "", "extra.yaml": "train: {steps: 3\n"},
    ),
    Case(
        "env-var-wrong-type",
        ["config", "--env-file", "{w}/env.yaml"],
        2,
        ("RAYTRAIN_STEPS", "train.steps", FIX),
        files={"env.yaml": ""},
        env={"RAYTRAIN_STEPS": "abc"},
    ),
    Case(
        "env-var-unknown",
        ["config", "--env-file", "{w}/env.yaml"],
        2,
        ("RAYTRAIN_STEPZ", "did you mean steps", FIX),
        files={"env.yaml": ""},
        env={"RAYTRAIN_STEPZ": "3"},
    ),
    # --- -p NAME VALUE ----------------------------------------------------------------------------------------
    p_case("p-unknown-name", "stepz", "3", "unknown setting 'stepz'", "did you mean steps", FIX),
    p_case("p-int-given-text", "steps", "abc", "train.steps (STEPS)", "-p steps", "Fix: a whole number"),
    p_case("p-dotted-below-minimum", "train.steps", "0", "train.steps", "at least 1", FIX),
    p_case("p-env-sh-name-fraction", "STEPS", "1.5", "train.steps", "-p STEPS", "Fix: a whole number"),
    p_case("p-version-not-minor", "k8s_version", "1.3", "aws.k8s_version", FIX),
    p_case("p-version-stays-text", "k8s_version", "1.30", "k8s_version: '1.30'", rc=0),
    p_case("p-target-unknown", "target", "gcp", "target", "Fix: one of local, aws"),
    p_case("p-list-given-text", "extra_pip", "torch", "train.extra_pip", "Fix: a list"),
    p_case("p-mapping-given-text", "nccl.env", "NCCL_DEBUG", "nccl.env", "Fix: a mapping"),
    Case("p-missing-value", ["config", "-p", "steps"], 2, ("-p/--param", "expected 2 arguments")),
    # --- audit --------------------------------------------------------------------------------------------------
    audit_case("audit-empty", b"", "is empty", "nccl.debug", FIX),
    audit_case("audit-binary", b"\x7fELF\x02\x01\x01\x00\x00\x00" * 50, "not a text log", FIX),
    audit_case("audit-gzip-is-read", _gz(NCCL_LOG.read_bytes()), "NCCL transport audit: PASS", rc=0),
    audit_case("audit-gzip-damaged", _gz(NCCL_LOG.read_bytes())[:200], "damaged gzip", FIX),
    audit_case("audit-missing", None, "does not exist", FIX),
    Case(
        "audit-folder-without-logs",
        ["audit", "{w}/logs", "--env-file", "{w}/env.yaml"],
        2,
        ("without worker-", FIX),
        files={"env.yaml": "", "logs/": ""},
    ),
    # --- render --out -----------------------------------------------------------------------------------------
    Case(
        "render-out-under-a-file",
        ["render", "--env-file", "{w}/env.yaml", "--out", "{w}/afile/manifests"],
        2,
        ("afile is a file", "--out", FIX),
        files={"env.yaml": "", "afile": "x"},
    ),
    Case(
        "render-out-is-a-file",
        ["render", "--env-file", "{w}/env.yaml", "--out", "{w}/afile"],
        2,
        ("afile is a file", FIX),
        files={"env.yaml": "", "afile": "x"},
    ),
    # --- notebooks out of order, unknown notebooks ------------------------------------------------------------
    Case(
        "run-05-before-02",
        ["run", "--env-file", "{w}/env.yaml", "--only", "05", *NO_CLUSTER],
        2,
        ("05_train needs the local Ray cluster", "local.gcs_port", "Fix", "--only 02"),
        files={"env.yaml": ""},
    ),
    Case(
        "run-unknown-notebook",
        ["run", "--env-file", "{w}/env.yaml", "--only", "99"],
        2,
        ("no notebook matches '99'", FIX),
        files={"env.yaml": ""},
    ),
    Case(
        "run-bad-setting-first",
        ["run", "--env-file", "{w}/env.yaml", "-p", "steps", "many"],
        2,
        ("train.steps", FIX),
        files={"env.yaml": ""},
    ),
    # --- init, commands ---------------------------------------------------------------------------------------
    Case("init-not-empty", ["init", "{w}/work"], 2, ("is not empty", "--force", FIX), files={"work/mine.txt": "x"}),
    Case("init-under-a-file", ["init", "{w}/afile/work"], 2, ("afile is a file", FIX), files={"afile": "x"}),
    Case(
        "cluster-unknown-action",
        ["cluster", "start", "--env-file", "{w}/env.yaml"],
        2,
        ("invalid choice: 'start'", "plan"),
        files={"env.yaml": ""},
    ),
]


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def _call(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse refusing the command line
            rc = e.code
    return rc, out.getvalue() + err.getvalue()


@pytest.fixture
def workdir(tmp_path, monkeypatch, clean_env):
    work = tmp_path / "w"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("RAYTRAIN_RUNS_DIR", str(tmp_path / "runs"))
    saved = dict(os.environ)
    yield work
    os.environ.clear()
    os.environ.update(saved)


def test_there_are_enough_cases():
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, workdir: Path, monkeypatch):
    for name, content in case.files.items():
        path = workdir / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    for k, v in case.env.items():
        monkeypatch.setenv(k, v.replace("{w}", str(workdir)))
    before = _tree(workdir.parent)
    rc, text = _call([a.replace("{w}", str(workdir)) for a in case.argv])
    assert rc == case.rc, text
    for needle in case.says:
        assert needle in text, f"{needle!r} not in:\n{text}"
    assert "Traceback" not in text
    assert _tree(workdir.parent) == before, "the command created or changed files"
    assert not (workdir.parent / "runs").exists()


def test_a_500_mb_log_is_refused_without_reading_it(workdir):
    big = workdir / "big.log"
    with big.open("wb") as f:
        f.truncate(500 * 2**20)  # sparse: no disk used
    tracemalloc.start()
    try:
        rc, text = _call(["audit", str(big), "--expect", "p2p"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rc == 2 and "500 MiB" in text and "grep -a 'NCCL INFO'" in text, text
    assert peak < 50 * 2**20, f"{peak / 2**20:.0f} MiB allocated to refuse a 500 MiB log"
