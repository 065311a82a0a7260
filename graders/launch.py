"""Starting and stopping the runner process (the seam the sandbox wraps).

The checker owns both pipes of the channel, drains the runner's stdout and
stderr into a capped buffer nobody parses, and enforces a wall-clock deadline
by killing the runner's whole process group. ``Launcher`` is the interface a
sandbox implements: it turns the runner's argv and environment into the
command that actually runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

from . import protocol
from .registry import REPO_ROOT
from .runner.main import BOOT

OUTPUT_CAP_BYTES = 64 * 1024
# variables a runner may inherit; everything else (tokens, database URLs) stays out
_PASSTHROUGH_ENV = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
                    "LD_LIBRARY_PATH", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                    "NVSHMEM_DISABLE_NVLS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


class Launcher(Protocol):
    """Wraps the runner command, e.g. in a sandbox. ``workdir`` is its private writable dir."""

    def command(self, argv: list[str], submission: Path, workdir: Path) -> list[str]: ...


class DirectLauncher:
    """No sandbox: a separate process in its own session, nothing more."""

    def command(self, argv: list[str], submission: Path, workdir: Path) -> list[str]:
        return argv


class CappedOutput:
    """Keeps the first ``cap`` bytes of a stream and counts the rest."""

    def __init__(self, stream: BinaryIO, cap: int = OUTPUT_CAP_BYTES):
        self.cap = cap
        self.kept = bytearray()
        self.dropped = 0
        self._thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self._thread.start()

    def _drain(self, stream: BinaryIO) -> None:
        while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
            room = self.cap - len(self.kept)
            self.kept += chunk[:max(room, 0)]
            self.dropped += max(len(chunk) - max(room, 0), 0)

    def text(self) -> str:
        self._thread.join(timeout=2)
        return self.kept.decode("utf-8", "replace")


@dataclass
class RunnerProcess:
    proc: subprocess.Popen
    to_runner: BinaryIO
    from_runner: BinaryIO
    output: CappedOutput
    workdir: tempfile.TemporaryDirectory
    deadline: float
    killed_at_deadline: bool = False
    _watchdog: threading.Timer | None = field(default=None, repr=False)

    def send(self, header: dict, arrays=None) -> None:
        protocol.send(self.to_runner, header, arrays)

    def receive(self) -> protocol.Message:
        return protocol.receive(self.from_runner)

    @property
    def seconds_left(self) -> float:
        return self.deadline - time.monotonic()

    def kill(self) -> None:
        """Kill the runner's whole process group (children and grandchildren too)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _on_deadline(self) -> None:
        self.killed_at_deadline = True
        self.kill()

    def close(self) -> int | None:
        if self._watchdog:
            self._watchdog.cancel()
        for stream in (self.to_runner, self.from_runner):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.kill()  # whatever it left behind in its group goes too
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.workdir.cleanup()
        return self.proc.returncode


def start_runner(submission: Path, device: str, timeout_s: float,
                 launcher: Launcher | None = None, python: str | None = None) -> RunnerProcess:
    launcher = launcher or DirectLauncher()
    workdir = tempfile.TemporaryDirectory(prefix="graders-run-")
    to_runner_r, to_runner_w = os.pipe()
    from_runner_r, from_runner_w = os.pipe()
    argv = [python or sys.executable, "-I", "-c", BOOT, str(REPO_ROOT),
            "--submission", str(submission), "--device", device,
            "--fds", f"{to_runner_r},{from_runner_w}"]
    env = {k: os.environ[k] for k in _PASSTHROUGH_ENV if k in os.environ}
    env.update(HOME=workdir.name, TMPDIR=workdir.name, PYTHONDONTWRITEBYTECODE="1",
               TRITON_CACHE_DIR=str(Path(workdir.name) / ".triton"))
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the interpreter run must not touch a GPU
    proc = subprocess.Popen(
        launcher.command(argv, submission, Path(workdir.name)),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        pass_fds=(to_runner_r, from_runner_w), cwd=workdir.name, env=env,
        start_new_session=True,
    )
    os.close(to_runner_r)
    os.close(from_runner_w)
    runner = RunnerProcess(
        proc=proc,
        to_runner=os.fdopen(to_runner_w, "wb", buffering=1 << 20),
        from_runner=os.fdopen(from_runner_r, "rb", buffering=1 << 20),
        output=CappedOutput(proc.stdout),
        workdir=workdir,
        deadline=time.monotonic() + timeout_s,
    )
    runner._watchdog = threading.Timer(timeout_s, runner._on_deadline)
    runner._watchdog.daemon = True
    runner._watchdog.start()
    return runner
