"""The processes of the local cluster, told apart by pid AND start time, and the ports it needs.

Each ``ray start`` runs as the leader of a new session; the processes it leaves running (GCS, raylet, dashboard,
agents) keep that session id, so right after it returns they are found and recorded as (pid, start time since
boot, boot id). A record matches a live process only when all three match, so a pid the kernel gave to another
program since is never touched. Stopping a record stops it and its descendants (Ray's workers, the job drivers).
Everything here reads ``/proc`` (Linux) and imports nothing of the package.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PROC = Path("/proc")


#: The kernel's id of this boot (a new random UUID at every boot).
BOOT_ID = PROC / "sys" / "kernel" / "random" / "boot_id"


def boot_id() -> str:
    """This boot's id. Not ``btime`` of /proc/stat: that is the wall clock minus the uptime, so it moves whenever
    the clock is stepped (NTP on a VM steps it by seconds), and every record would then look like another boot's."""
    return BOOT_ID.read_text().strip()


def stat_fields(pid: int) -> dict[str, Any] | None:
    """ppid, state, session and start time (clock ticks after boot, field 22) of a process; None when gone."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ")"
    rest = raw.rsplit(")", 1)[1].split()
    return dict(pid=pid, state=rest[0], ppid=int(rest[1]), session=int(rest[3]), start=int(rest[19]))


def _all_stats() -> list[dict[str, Any]]:
    out = []
    for d in PROC.iterdir():
        if d.name.isdigit():
            st = stat_fields(int(d.name))
            if st is not None:
                out.append(st)
    return out


def record(st: dict[str, Any], boot: str, **extra: Any) -> dict[str, Any]:
    return dict(pid=st["pid"], start=st["start"], boot=boot, **extra)


def session_records(session: int, **extra: Any) -> list[dict[str, Any]]:
    """Records of the live processes of one session (what a ``ray start`` run as a session leader left)."""
    boot = boot_id()
    return [record(st, boot, **extra) for st in _all_stats() if st["session"] == session and st["state"] != "Z"]


def command_line(pid: int) -> list[str]:
    """A process's arguments, its program first; [] when it is gone."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.rstrip(b"\0").split(b"\0")] if raw else []


def program(pid: int) -> str:
    """The file name of a process's program (``raylet``, ``gcs_server``, ``python3``...); "" when gone."""
    argv = command_line(pid)
    return os.path.basename(argv[0]) if argv else ""


def is_alive(rec: dict[str, Any]) -> bool:
    """True when the process of this record still runs: same pid, same start time, same boot, not a zombie."""
    st = stat_fields(int(rec["pid"]))
    if st is None or st["state"] == "Z":
        return False
    try:
        return st["start"] == int(rec["start"]) and boot_id() == str(rec["boot"])
    except (OSError, KeyError, ValueError):
        return False


def with_descendants(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The live recorded processes and every live descendant of them, as records (pid + start time)."""
    boot = boot_id()
    stats = _all_stats()
    children: dict[int, list[dict[str, Any]]] = {}
    for st in stats:
        children.setdefault(st["ppid"], []).append(st)
    me = os.getpid()
    found: dict[int, dict[str, Any]] = {}
    todo = [stat_fields(int(r["pid"])) for r in records if is_alive(r)]
    while todo:
        st = todo.pop()
        if st is None or st["pid"] in found or st["pid"] == me or st["state"] == "Z":
            continue
        found[st["pid"]] = record(st, boot)
        todo.extend(children.get(st["pid"], []))
    return sorted(found.values(), key=lambda r: r["pid"])


def _signal(recs: list[dict[str, Any]], sig: int) -> None:
    for rec in recs:
        if is_alive(rec):  # checked right before the signal: a reused pid is never hit
            try:
                os.kill(int(rec["pid"]), sig)
            except (ProcessLookupError, PermissionError):
                pass


def stop(records: list[dict[str, Any]], timeout_s: float = 6.0) -> list[dict[str, Any]]:
    """SIGTERM the recorded processes and their descendants, SIGKILL what is left; returns what still runs.

    The tree is read again before each round, so a worker the raylet spawned meanwhile is stopped too."""
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        targets = with_descendants(records)
        if not targets:
            return []
        _signal(targets, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            targets = [r for r in targets if is_alive(r)]
            if not targets:
                break
            time.sleep(0.2)
        records = records + targets
    return [r for r in with_descendants(records) if is_alive(r)]


# --------------------------------------------------------------------------------------------
# Ports
# --------------------------------------------------------------------------------------------


def port_free(port: int, host: str) -> bool:
    """Whether a server could bind ``host:port`` now (SO_REUSEADDR, as servers do: TIME_WAIT does not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def tcp_sockets() -> Iterator[list[str]]:
    """The rows of ``/proc/net/tcp`` and ``tcp6``, split in columns (local address at 1, state at 3, inode at 9)."""
    for name in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9:
                yield cols


def _socket_inodes(port: int) -> set[str]:
    inodes = set()
    for cols in tcp_sockets():
        if int(cols[1].rsplit(":", 1)[1], 16) == port and cols[9] != "0":
            inodes.add(cols[9])
    return inodes


def holders(port: int) -> list[int]:
    """The processes this user can see that hold a TCP socket on ``port`` (any address, any state), by pid."""
    wanted = {f"socket:[{i}]" for i in _socket_inodes(port)}
    found = []
    for d in PROC.iterdir() if wanted else ():
        if not d.name.isdigit():
            continue
        try:
            fds = list((d / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) in wanted:
                    found.append(int(d.name))
                    break
            except OSError:
                continue
    return found


def port_holder(port: int) -> str:
    """Who holds a TCP port: ``pid 123 (cmd line)``, or a sentence saying the process is not visible."""
    for pid in holders(port):
        argv = command_line(pid)
        if argv:
            return f"pid {pid} ({' '.join(argv)[:120]})"
    return "no process this user can see (another user's, or a socket bound but not listening: /proc omits those)"


def _addr(hexaddr: str) -> str:
    """``0100007F`` (/proc/net/tcp, little-endian words) -> 127.0.0.1; IPv6 likewise; unspecified -> ``*``."""
    raw = bytes.fromhex(hexaddr)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    fam = socket.AF_INET if len(words) == 4 else socket.AF_INET6
    ip = socket.inet_ntop(fam, words).removeprefix("::ffff:")  # an IPv4 address on an IPv6 socket
    return "*" if ip in ("0.0.0.0", "::") else ip


def listening(pids: list[int]) -> list[dict[str, Any]]:
    """The TCP sockets in LISTEN state (``0A``) held by these processes: address (``*`` = every interface), port,
    pid and program, from ``/proc/net/tcp{,6}`` and each process's open file descriptors."""
    socks: dict[str, tuple[str, int]] = {}
    for cols in tcp_sockets():
        if cols[3] == "0A":
            host, port = cols[1].rsplit(":", 1)
            socks[f"socket:[{cols[9]}]"] = (_addr(host), int(port, 16))
    out = []
    for pid in pids:
        try:
            fds = list((PROC / str(pid) / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                hit = socks.get(os.readlink(fd))
            except OSError:
                continue
            if hit:
                out.append(dict(address=hit[0], port=hit[1], pid=pid, program=program(pid)))
    return sorted(out, key=lambda r: (r["address"] != "127.0.0.1", r["port"]))
