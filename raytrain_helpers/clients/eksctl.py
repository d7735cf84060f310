"""eksctl as a subprocess: its output redacted into a log file, and a progress display while it runs.

The same progress display serves every long wait of the aws target (a state string and the elapsed time).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .aws import AwsError, err_code, redact

EKSCTL_INSTALL_HINT = (
    "eksctl is not on PATH. Install it (https://eksctl.io/installation/), e.g. on Linux x86_64:\n"
    '  curl -sLO "https://github.com/eksctl-io/eksctl/releases/latest/download/eksctl_Linux_amd64.tar.gz"\n'
    "  tar -xzf eksctl_Linux_amd64.tar.gz -C /tmp && sudo install -m 0755 /tmp/eksctl /usr/local/bin/eksctl\n"
    "or `brew install eksctl` on macOS; then re-run this step (it resumes from the real state)."
)
#: How many of eksctl's last output lines a result keeps.
TAIL_LINES = 25


def eksctl_path() -> str:
    """The eksctl executable; :class:`AwsError` with the install instructions when it is missing."""
    path = shutil.which("eksctl")
    if not path:
        raise AwsError(EKSCTL_INSTALL_HINT)
    return path


# --------------------------------------------------------------------------------------------------------------
# The progress display
# --------------------------------------------------------------------------------------------------------------


def kernel_allows_input() -> bool:
    """True inside a Jupyter kernel whose current request allows stdin (never under papermill)."""
    try:
        from IPython import get_ipython  # type: ignore
    except ImportError:
        return False
    kernel = getattr(get_ipython(), "kernel", None)
    return bool(kernel is not None and getattr(kernel, "_allow_stdin", False))


def isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython  # type: ignore
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


class Progress:
    """A tqdm bar without a total: it shows the current state and the elapsed time.

    In a terminal or a live notebook it refreshes every second; in a log or a headless (papermill) run it
    writes a line only when the state changes or every minute, so outputs stay short.
    """

    def __init__(self, desc: str) -> None:
        in_kernel = _in_kernel()
        live = kernel_allows_input() if in_kernel else isatty(sys.stdout)
        if in_kernel and live:
            from tqdm.auto import tqdm
        else:
            from tqdm import tqdm
        self.every = 1.0 if live else 60.0
        self.bar = tqdm(
            total=None,
            desc=desc,
            bar_format="{desc} | elapsed {elapsed}",
            leave=True,
            file=sys.stdout,
            mininterval=self.every,
            dynamic_ncols=live,
        )
        self.desc = desc
        self.state = None
        self.last = time.monotonic()

    def set(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.bar.set_description_str(f"{self.desc}: {state}", refresh=True)
            self.last = time.monotonic()

    def tick(self) -> None:
        if time.monotonic() - self.last >= self.every:
            self.bar.refresh()
            self.last = time.monotonic()

    def close(self) -> None:
        self.bar.close()


def progress(desc: str) -> Progress:
    return Progress(desc)


# --------------------------------------------------------------------------------------------------------------
# Running eksctl
# --------------------------------------------------------------------------------------------------------------


@dataclass
class CommandResult:
    argv: list[str]
    returncode: int
    log_path: Path
    tail: list[str] = field(default_factory=list)


def run_eksctl(
    args: Sequence[str],
    *,
    log_path: Path,
    sess=None,
    desc: str = "eksctl",
    poll: Callable[[], str] | None = None,
    poll_every: float = 20.0,
    timeout: float = 3 * 3600,
) -> CommandResult:
    """Run ``eksctl ARGS`` with its output in ``log_path`` and a progress bar showing ``poll()``'s state."""
    argv = [eksctl_path(), *args]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    shown = " ".join(["eksctl", *args])
    print(f"$ {shown}    (log: {log_path})", flush=True)
    lines: list[str] = []
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True
        )
        pump = threading.Thread(target=_pump, args=(proc, log, lines, sess), daemon=True)
        pump.start()
        bar = progress(desc)
        try:
            _watch(proc, bar, poll=poll, poll_every=poll_every, timeout=timeout, shown=shown, log_path=log_path)
        except KeyboardInterrupt:
            _interrupt(proc, log_path)
            raise
        finally:
            pump.join(timeout=5)
            bar.close()
    return CommandResult(
        argv=["eksctl", *args], returncode=proc.returncode, log_path=log_path, tail=lines[-TAIL_LINES:]
    )


def _pump(proc: subprocess.Popen, log, lines: list[str], sess) -> None:
    """Copy the process's output, redacted, into the log file and ``lines``."""
    assert proc.stdout is not None
    for line in proc.stdout:
        clean = redact(line.rstrip("\n"), sess)
        lines.append(clean)
        log.write(clean + "\n")
        log.flush()


def _watch(
    proc: subprocess.Popen,
    bar: Progress,
    *,
    poll: Callable[[], str] | None,
    poll_every: float,
    timeout: float,
    shown: str,
    log_path: Path,
) -> None:
    """Wait for the process, showing ``poll()``'s state; stop it after ``timeout`` seconds."""
    start = time.monotonic()
    last_poll = -1e9
    while proc.poll() is None:
        now = time.monotonic()
        if poll is not None and now - last_poll >= poll_every:
            last_poll = now
            try:
                bar.set(poll())
            except Exception as e:  # noqa: BLE001 - a failed poll must not kill the wait
                bar.set(f"(state unknown: {err_code(e)})")
        if now - start > timeout:
            proc.terminate()
            raise AwsError(f"{shown} did not finish within {timeout / 60:.0f} min; see {log_path}")
        bar.tick()
        time.sleep(0.2)


def _interrupt(proc: subprocess.Popen, log_path: Path) -> None:
    """Ctrl-C / kernel interrupt: pass it on to eksctl and say what CloudFormation still does."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)
    print(
        f"\ninterrupted: eksctl stopped, but CloudFormation carries on with what it started. "
        f"Re-run the step to resume from the real state, or run `down` to remove it. Log: {log_path}"
    )
