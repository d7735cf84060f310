"""How the suite itself runs: the processes it starts write the bytecode of what they import, and the ports its
tests hand to servers are not ones a Ray cluster beside them may take meanwhile."""

from __future__ import annotations

import socket
import subprocess
import sys

from tests.helpers import free_port


def test_the_processes_the_suite_starts_write_bytecode():
    """The test command installs without compiling every module up front; a Ray worker, a kernel or a notebook
    started by a test compiles what it imports once and writes it, even where the caller's shell set
    PYTHONDONTWRITEBYTECODE (else each of the suite's hundred Python processes would compile Ray and PyTorch anew)."""
    assert sys.dont_write_bytecode is False
    out = subprocess.run(
        [sys.executable, "-c", "import sys; print(sys.dont_write_bytecode)"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False", "a subprocess of the suite would not write bytecode"


def test_ports_handed_to_servers_are_outside_the_ephemeral_range():
    """A test picks a port, then starts a server on it; a Ray cluster of another test binds ephemeral ports at
    random meanwhile. The ports the tests pick are therefore below the kernel's ephemeral range and above Ray's
    worker ports, and free when picked."""
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    ports = {free_port() for _ in range(20)}
    assert all(20000 <= p < low for p in ports), sorted(ports)
    for p in ports:
        with socket.socket() as s:
            s.bind(("", p))
