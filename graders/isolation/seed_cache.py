"""The grader's own kernel, compiled once per slot, for every runner to copy.

Each runner proves its toolchain with the known-answer kernel (graders.isolation.pool), and on a
GPU compiling it cost every runner seconds of CPU, which a busy slot's 16 cores pay five times a
grading. So the slot compiles it once, in a trusted process of its own that runs nothing but that
kernel, into a folder only the grader writes. Runners see it read-only
(``graders.shared.protocol.SEED_CACHE_ENV`` names where) and copy it into their own Triton cache
before warming, so the compile finds it there.

This shares nothing between students: the seed holds only the grader's kernel, made
before any submission, and no runner can write it. A runner's cache stays its own.
A seed that does not match (another Triton, another target) just misses: the runner
compiles as it did without one, and says so.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

from graders.shared.gpuinfo import cuda_visible_devices

log = logging.getLogger(__name__)
SEED_TIMEOUT_S = 120.0


def make_seed_cache(known_shape: tuple[int, int], gpu_index: int | None,
                    env: dict[str, str], gate=None) -> Path | None:
    """Compile the known-answer kernel into a new folder readable by every job uid; its
    path, or None (logged) if that failed. ``env``: the runners' own environment, so
    the cache keys match theirs (their GPU memory cap included). ``gate``: the GPU's gate
    (graders.isolation.pool.GpuGate), passed shared as a runner's first GPU work is: the
    compile reads the GPU through the driver, and no timing on the GPU sees it."""
    from graders.shared.paths import REPO_ROOT

    folder = Path(tempfile.mkdtemp(prefix="graders-seed-"))
    cache = folder / "triton"
    run_env = dict(env, TRITON_CACHE_DIR=str(cache), HOME=str(folder), TMPDIR=str(folder),
                   CUDA_VISIBLE_DEVICES="" if gpu_index is None else cuda_visible_devices(gpu_index))
    started = time.monotonic()
    try:
        with gate.shared() if gate is not None else nullcontext():
            proc = subprocess.run([sys.executable, "-I", "-c", _BOOT, str(REPO_ROOT),
                                   *map(str, known_shape)], env=run_env, cwd=folder,
                                  capture_output=True, text=True, timeout=SEED_TIMEOUT_S)
        failed = proc.returncode != 0 or not cache.is_dir()
        why = (proc.stderr or proc.stdout).strip()[-400:]
    except (OSError, subprocess.TimeoutExpired) as exc:
        failed, why = True, str(exc)
    if failed:
        log.warning("no seed cache for the known-answer kernel (each runner compiles it): %s",
                    why)
        shutil.rmtree(folder, ignore_errors=True)
        return None
    strip_host_stubs(cache)
    for path in [folder, *folder.rglob("*")]:  # job uids read it (graders/isolation/jobuids.py)
        path.chmod(0o755 if path.is_dir() else 0o644)
    log.info("seed cache for the known-answer kernel made in %.1f s", time.monotonic() - started)
    return cache


def strip_host_stubs(cache: Path) -> None:
    """Keep only the kernel's own artifacts. Triton's host stubs (the driver's cuda_utils
    and the kernel's launcher: shared objects compiled and linked by this process, outside
    the sandbox) are left for each runner to build where it runs: on the H200 every runner
    that loaded the seed's cuda_utils crashed with SIGSEGV while warming up, and the slot
    graded nothing but grader_error after its seed was made."""
    for stub in {so.parent for so in cache.rglob("*.so")}:
        shutil.rmtree(stub, ignore_errors=True)


def remove_seed_cache(cache: Path | None) -> None:
    if cache is not None:
        shutil.rmtree(cache.parent, ignore_errors=True)


# as the runner starts (graders.shared.protocol.BOOT): the repository first on sys.path
_BOOT = ("import sys, runpy; sys.path.insert(0, sys.argv[1]); del sys.argv[1]; "
         "runpy.run_module('graders.runner.known_answer', run_name='__main__', alter_sys=True)")
