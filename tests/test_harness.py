"""How the suite itself runs: the processes it starts write the bytecode of what they import."""

from __future__ import annotations

import subprocess
import sys


def test_the_processes_the_suite_starts_write_bytecode():
    """The test command installs without compiling every module up front; a Ray worker, a kernel or a notebook
    started by a test compiles what it imports once and writes it, even where the caller's shell set
    PYTHONDONTWRITEBYTECODE (else each of the suite's hundred Python processes would compile Ray and PyTorch anew)."""
    assert sys.dont_write_bytecode is False
    out = subprocess.run(
        [sys.executable, "-c", "import sys; print(sys.dont_write_bytecode)"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False", "a subprocess of the suite would not write bytecode"
