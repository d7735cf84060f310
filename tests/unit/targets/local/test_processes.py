"""What the local target stops and where it writes: only the processes it recorded (pid + start time) and their
descendants, only in a temp root it owns; the token file is created 0600; the cluster results' ``ok``.

Real processes (``sleep`` under a shell), no Ray: nothing answers on the settings' ports."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from raytrain_helpers.core import config
from raytrain_helpers.targets import local
from raytrain_helpers.targets.local import procs, raylets, rootdir
from tests.helpers import free_port


@pytest.fixture
def short_root():
    """A fresh temp root short enough for the setting (at most 40 characters)."""
    d = tempfile.mkdtemp(prefix="rt-unit-", dir="/tmp")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def settings(clean_env, repo_root, short_root):
    gcs, dash = free_port(), free_port()
    return config.load(
        repo_root / "env.yaml",
        environ={},
        gpus_per_worker_node=0,
        temp_root=str(short_root / "c"),
        gcs_port=gcs,
        dashboard_port=dash,
    )


@pytest.fixture
def spawn():
    """Start a process; every one started is killed at the end whatever the test did."""
    started: list[subprocess.Popen] = []

    def start(argv: list[str], **kw) -> subprocess.Popen:
        p = subprocess.Popen(argv, **kw)
        started.append(p)
        return p

    yield start
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


def _running(p: subprocess.Popen) -> bool:
    st = procs.stat_fields(p.pid)
    return p.poll() is None and st is not None and st["state"] != "Z"


def _decoy(spawn, root: Path, port: int) -> subprocess.Popen:
    """A program that looks like a raylet of this cluster: temp_root and ':<gcs_port> raylet' in its command
    line, its working directory the temp root. Not started by the tool."""
    root.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-c", "import time; time.sleep(120)", f"{root}/head/raylet", f"127.0.0.1:{port}", "raylet"]
    return spawn(argv, cwd=root)


def _children(pid: int) -> list[dict]:
    stats = [procs.stat_fields(int(d.name)) for d in Path("/proc").iterdir() if d.name.isdigit()]
    return [_record_pid(st["pid"]) for st in stats if st is not None and st["ppid"] == pid]


def _record_pid(pid: int) -> dict:
    return procs.record(procs.stat_fields(pid), procs.boot_id())


def _write_state(settings, records: list[dict]) -> None:
    rootdir.claim(Path(settings.local.temp_root))
    raylets.state_path(settings).write_text(json.dumps(dict(shape={}, node_names={}, processes=records)))


def _record(p: subprocess.Popen) -> dict:
    return _record_pid(p.pid)


def test_down_stops_what_it_recorded_and_its_children_and_spares_a_decoy(settings, spawn):
    decoy = _decoy(spawn, Path(settings.local.temp_root), settings.local.gcs_port)
    # a recorded "raylet" with a child: the child is not recorded (as Ray's workers are not) but is a descendant
    ours = spawn(["bash", "-c", "sleep 120 & wait"])
    _write_state(settings, [_record(ours)])
    deadline = time.monotonic() + 10
    while not (kids := _children(ours.pid)):
        assert time.monotonic() < deadline, "the child sleep did not start"
        time.sleep(0.05)
    assert set(local.our_pids(settings)) == {ours.pid, kids[0]["pid"]}

    info = local.down(settings)

    assert info.ok and info.action == "stopped" and not info.running
    ours.wait(timeout=10)
    assert not procs.is_alive(kids[0]), "a descendant of a recorded process was left running"
    assert _running(decoy), "down stopped a process it did not start"
    assert not raylets.state_path(settings).exists() and local.our_pids(settings) == []


#: A raylet stand-in: on SIGTERM it looks (after a moment) whether the GCS still runs, writes what it saw, exits.
_RAYLET = """
import os, signal, sys, time
def bye(*_):
    time.sleep(0.3)
    try:
        state = open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "gone"
    open(sys.argv[2], "w").write(state)
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
open(sys.argv[2] + ".ready", "w").close()
time.sleep(120)
"""


def test_down_stops_the_gcs_last(settings, spawn, tmp_path):
    """The raylets are told to stop while the GCS still runs (they say goodbye to it), the GCS after them."""
    gcs = spawn(["bash", "-c", "exec -a gcs_server sleep 120"])
    seen = tmp_path / "seen"
    raylet = spawn([sys.executable, "-c", _RAYLET, str(gcs.pid), str(seen)])
    deadline = time.monotonic() + 10
    while procs.program(gcs.pid) != "gcs_server" or not Path(f"{seen}.ready").exists():
        assert time.monotonic() < deadline, "the stand-ins did not start"
        time.sleep(0.05)
    _write_state(settings, [_record(gcs), _record(raylet)])  # the GCS first, as `ray start --head` records it

    assert local.down(settings).ok

    assert seen.read_text() in ("S", "R"), f"the GCS was already stopped when the raylet was (state {seen.read_text()})"
    assert not _running(gcs) and not _running(raylet)


def test_a_record_names_the_boot_by_the_kernels_boot_id(spawn):
    """The boot is the kernel's boot id, which a stepped clock leaves alone (btime, the wall clock minus the
    uptime, moves with it: every record then looked like another boot's and down left the whole cluster running)."""
    rec = _record_pid(spawn([sys.executable, "-c", "import time; time.sleep(30)"]).pid)
    assert rec["boot"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert procs.is_alive(rec)


def test_a_reused_pid_is_never_hit(settings, spawn):
    """The state file names the decoy's pid with another start time (the pid was reused): it survives."""
    decoy = _decoy(spawn, Path(settings.local.temp_root), settings.local.gcs_port)
    rec = _record(decoy)
    _write_state(settings, [dict(rec, start=rec["start"] - 1)])
    assert local.our_pids(settings) == []
    local.down(settings)
    assert _running(decoy)
    _write_state(settings, [dict(rec, boot="0" * 36)])  # the same pid and ticks, another boot
    local.down(settings)
    assert _running(decoy)


@pytest.mark.parametrize("root", ["/", "/tmp", "HOME", "foreign", "file"])
def test_a_temp_root_the_tool_does_not_own_is_refused(settings, short_root, root, monkeypatch):
    if root == "HOME":
        monkeypatch.setenv("HOME", str(short_root))
        root = str(short_root)
    elif root == "foreign":
        (short_root / "notes.txt").write_text("someone's file")
        root = str(short_root)
    elif root == "file":
        (short_root / "f").write_text("x")
        root = str(short_root / "f")
    before = sorted(p.name for p in short_root.iterdir())
    s = config.with_overrides(settings, temp_root=root)
    calls = [lambda: local.up(s, plan=True), lambda: local.down(s)]
    if root.startswith(str(short_root)):  # a real `up` only where a regression could write nowhere but here
        monkeypatch.setattr(raylets, "start_raylets", lambda *a, **k: pytest.fail("a cluster would start there"))
        calls.append(lambda: local.up(s))
    for call in calls:
        with pytest.raises(local.LocalClusterError, match=r"local\.temp_root = .*Fix: set local\.temp_root"):
            call()
    assert sorted(p.name for p in short_root.iterdir()) == before, "something was created in a refused folder"


def test_the_tool_marks_the_temp_root_it_creates_and_takes_over_its_own_older_one(short_root):
    new = short_root / "new"
    rootdir.claim(new)
    assert (new / rootdir.MARKER).is_file()
    rootdir.check(new)  # its own, non-empty: accepted
    older = short_root / "older"  # what the tool wrote before it marked its folders
    for sub in ("head", "worker-0", "worker-1"):
        (older / sub).mkdir(parents=True)
    (older / "cluster.json").write_text("{}")
    rootdir.claim(older)
    assert (older / rootdir.MARKER).is_file()


def test_the_token_file_is_created_0600_never_wider(settings, monkeypatch):
    """With a umask of 0 (anything created is as open as its creator asks) and chmod forbidden, the token file
    is still 0600: it was created so, never written open and narrowed afterwards."""
    s = config.with_overrides(settings, auth_mode="token")
    rootdir.claim(Path(s.local.temp_root))
    for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(k, raising=False)

    def no_chmod(*args, **kwargs):
        raise AssertionError("the token file's mode was changed after it was created")

    monkeypatch.setattr(os, "chmod", no_chmod)
    monkeypatch.setattr(os, "fchmod", no_chmod)
    monkeypatch.setattr(Path, "chmod", no_chmod)
    old = os.umask(0)
    try:
        raylets.new_auth_token(s)
        raylets.new_auth_token(s)  # a second up replaces the token, with the same mode
    finally:
        os.umask(old)
    tp = raylets.token_path(s)
    assert oct(tp.stat().st_mode & 0o777) == "0o600" and len(tp.read_text()) == 64
    assert os.environ["RAY_AUTH_TOKEN_PATH"] == str(tp)


def test_ok_means_the_action_succeeded(settings):
    info = local.up(settings, plan=True)
    assert info.action == "plan" and info.ok and not info.running
    assert not local.status(settings).ok, "status of a cluster that is not running is not ok"
    gone = local.down(settings)
    assert gone.ok and gone.message == "nothing was running"


def test_the_job_runs_with_the_cluster_interpreter(settings):
    assert local.job_defaults(settings).python == sys.executable  # nothing recorded: this interpreter
    _write_state(settings, [])
    state = json.loads(raylets.state_path(settings).read_text())
    raylets.state_path(settings).write_text(json.dumps(dict(state, python="/opt/env/bin/python3.11")))
    assert local.job_defaults(settings).python == "/opt/env/bin/python3.11"


def test_worker_raylets_start_several_at_once_only_where_the_cpus_allow():
    assert [raylets.start_parallelism(2, cpus) for cpus in (1, 2, 4, 8, 16)] == [1, 1, 1, 2, 2]
    assert raylets.start_parallelism(16, 16) == 4 and raylets.start_parallelism(1, 64) == 1


def _foreign(path: Path, monkeypatch) -> None:
    """Make ``path`` another user's: chown it where this process may (root), else let the tool see another uid."""
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)
    else:
        uid = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: uid + 1)


@pytest.mark.parametrize("case", ["another user's", "group-writable", "world-writable", "a symbolic link"])
def test_a_temp_root_others_could_prepare_or_change_is_refused(settings, short_root, case, monkeypatch):
    """A folder under the shared /tmp that someone else made (even with the tool's marker and a cluster.json naming
    their interpreter), that others may write in, or a link to one, is refused before anything is read from it or
    written to it."""
    root = short_root / "c"
    rootdir.claim(root)
    _write_state(settings, [])
    state = json.loads(raylets.state_path(settings).read_text())
    raylets.state_path(settings).write_text(json.dumps(dict(state, python="/home/mallory/evil-python")))
    s = settings
    if case == "another user's":
        _foreign(root, monkeypatch)
    elif case == "group-writable":
        os.chmod(root, 0o770)
    elif case == "world-writable":
        os.chmod(root, 0o1777)
    else:
        os.symlink(root, short_root / "link")
        s = config.with_overrides(settings, temp_root=str(short_root / "link"))
    before = sorted(p.name for p in root.iterdir())
    monkeypatch.setattr(raylets, "start_raylets", lambda *a, **k: pytest.fail("a cluster would start there"))
    for call in (lambda: local.up(s), lambda: local.down(s), lambda: local.job_defaults(s)):
        with pytest.raises(local.LocalClusterError, match=r"local\.temp_root = .*(another user|writable by group "
                           r"or others|symbolic link).*Fix: set local\.temp_root"):  # fmt: skip
            call()
    assert sorted(p.name for p in root.iterdir()) == before


def test_the_temp_root_is_created_0700_for_this_user_only(settings):
    old = os.umask(0)
    try:
        rootdir.claim(Path(settings.local.temp_root))
    finally:
        os.umask(old)
    st = os.stat(settings.local.temp_root)
    assert oct(st.st_mode & 0o777) == "0o700" and st.st_uid == os.geteuid()


@pytest.mark.parametrize("name", ["cluster.json", "auth_token", "ray-start.log", "worker-0/ray-start.log", "head"])
def test_a_symbolic_link_planted_in_the_temp_root_is_never_followed(settings, short_root, name):
    """A link put where the tool writes or reads (state, token, logs, a raylet's folder) is refused: the file or
    folder it points to is neither written nor read."""
    s = config.with_overrides(settings, auth_mode="token")
    root = Path(s.local.temp_root)
    rootdir.claim(root)
    target = short_root / "elsewhere"
    target.mkdir() if name == "head" else target.write_text('{"python": "/home/mallory/evil-python"}')
    before = sorted(target.iterdir()) if target.is_dir() else target.read_text()
    link = root / name
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(target)
    with pytest.raises((local.LocalClusterError, rootdir.TempRootError), match="symbolic link"):
        if name == "cluster.json":
            local.job_defaults(s)
        elif name == "auth_token":
            raylets.new_auth_token(s)
            assert not link.is_symlink() and target.read_text() == before  # the link itself was replaced
            raise rootdir.TempRootError("symbolic link removed, not followed")
        elif name == "worker-0/ray-start.log":
            raylets.start_worker_node(s, dict(name="worker-0", gpus=[]), {}, recorder=None)
        else:  # the head's log and folder: the first things a start writes
            raylets.start_raylets(s, dict(workers=[]), {}, 1.0, recorder=None, on_node=None)
    assert (sorted(target.iterdir()) if target.is_dir() else target.read_text()) == before


def test_listening_sockets_are_read_with_their_address():
    """What 02's exposure table is made of: this process's own listening sockets, read from /proc, with the address
    they are bound to (``*`` for every interface, IPv4 on an IPv6 socket as IPv4)."""
    socks = []
    try:
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
            s = socket.socket(family)
            socks.append(s)
            s.bind((host, 0))
            s.listen()
        s = socket.socket(socket.AF_INET6)
        socks.append(s)
        s.bind(("::ffff:127.0.0.1", 0))
        s.listen()
        found = {r["port"]: r["address"] for r in procs.listening([os.getpid()])}
        want = {x.getsockname()[1]: a for x, a in zip(socks, ["127.0.0.1", "*", "*", "127.0.0.1"], strict=True)}
        assert {p: found.get(p) for p in want} == want
    finally:
        for s in socks:
            s.close()
    rows = raylets.exposure_rows([dict(role="GCS", address="*"), dict(role="GCS", address="*")], token_auth=False)
    assert rows == [("GCS", "the network (every interface)", "OFF: anyone who reaches it runs code")]


def test_a_dashboard_agents_metrics_port_is_said_to_ask_for_no_token(settings, spawn):
    """Each agent writes its Prometheus exporter's port to <session dir>/metrics_export_port_<node id> (Ray 2.58): the
    exposure table names that port as metrics, answered without a token, not as the agent's token-guarded ports."""
    from raytrain_helpers.targets.local import cluster_state

    root = cluster_state.temp_root(settings)
    code = (
        "import socket, sys, time\n"
        "socks = [socket.socket() for _ in range(2)]\n"
        "[s.bind(('127.0.0.1', 0)) or s.listen() for s in socks]\n"
        "print(*[s.getsockname()[1] for s in socks], flush=True)\n"
        "time.sleep(60)\n"
    )
    p = spawn([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    metrics_port, agent_port = (int(x) for x in p.stdout.readline().split())
    session = root / "worker-0" / "session_2026"
    session.mkdir(parents=True)
    (root / "worker-0" / "session_latest").symlink_to(session)
    (session / ("metrics_export_port_" + "ab" * 28)).write_text(str(metrics_port))
    assert cluster_state.metrics_export_ports(settings) == {metrics_port}
    state = {"processes": [procs.record(procs.stat_fields(p.pid), procs.boot_id())], "shape": {}}
    found = {r["port"]: r["role"] for r in cluster_state.listeners(state, cluster_state.metrics_export_ports(settings))}
    assert found[metrics_port] == cluster_state.AGENT_METRICS and found[agent_port] != cluster_state.AGENT_METRICS
    rows = raylets.exposure_rows([{"role": found[metrics_port], "address": "*"}], token_auth=True)
    assert rows == [(cluster_state.AGENT_METRICS, "the network (every interface)", cluster_state.METRICS_ONLY)]
    assert "no token" in cluster_state.METRICS_ONLY
