"""The runners' Python bytecode, compiled once by the grader and read by every runner.

A runner may not write bytecode: its Python environment is bound read-only into the sandbox
(and with ``-I`` it ignores PYTHONDONTWRITEBYTECODE either way). So each runner compiled, from
source, every module it imported that had no bytecode beside it: always the runner's own
modules (no grader process imports them), and on the benches' GPU image whatever torch
ships none for (680 ``.pyc`` files for 2,141 modules). Measured on the H200: 0.3 CPU-s of a
runner's ~5 to make; on the CI machine 0.5 of ~3 (docs/benchmarks.md, sixteenth session).

So a grader that keeps runners warm compiles, once, the modules a runner imports (numpy,
torch, triton, the runner's own code) into a folder of its own, with Python's
``pycache_prefix`` layout (the bytecode of ``/a/b.py`` is ``PREFIX/a/b.cpython-3XY.pyc``), and
each sandboxed runner started after that reads it: ``-X pycache_prefix`` names the folder,
bound read-only (a runner without the sandbox runs as the grader's own user, could write
into it, and is never given it). Python checks each file's bytecode against its source (size and
modification time) before using it, so bytecode left from an earlier install costs only a
compile in memory, never a wrong module. The folder is the grader's own, in the system's
temporary folder where every job uid can read it (a home folder often cannot be entered),
and is refused if anybody else could have written it.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import logging
import os
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from graders.isolation import triton_key

log = logging.getLogger(__name__)

SANDBOX_ROOT = "/grader"  # where a sandbox binds the graders package (graders.isolation.sandbox)
SANDBOX_BYTECODE = f"{SANDBOX_ROOT}/bytecode"  # ... and this folder
FILL_TIMEOUT_S = 300
_MARK = "filled"  # holds the fingerprint of what the folder was last filled for

# Run by the grader's own Python, never in a sandbox: imports what a runner imports on every
# device (the runner's modules by name, never a submission), writing their bytecode under
# the prefix; then every module of Triton (its compiler and backends are imported at a
# runner's first compile), and the runner's code once more as a sandbox names it (/grader).
_FILL = r"""
import compileall, importlib, importlib.util, os, pkgutil, py_compile, sys
os.umask(0o022)  # folders and files every job uid can read
repo, sandbox_root = sys.argv[1], sys.argv[2]
sys.path.insert(0, repo)
import numpy, torch, triton
import torch.utils._python_dispatch
import graders.runner
names = [m.name for m in pkgutil.iter_modules(graders.runner.__path__, "graders.runner.")]
for name in names:
    importlib.import_module(name)
compileall.compile_dir(os.path.dirname(triton.__file__), quiet=2)
graders = os.path.join(repo, "graders")
for folder, _, files in os.walk(graders):
    for name in files:
        if name.endswith(".py"):
            source = os.path.join(folder, name)
            seen = sandbox_root + "/graders/" + os.path.relpath(source, graders)
            py_compile.compile(source, cfile=importlib.util.cache_from_source(seen),
                               dfile=seen, doraise=True)
"""

_lock = threading.Lock()
_ready: list[Path] = []  # the folder, once filled for this Python and these packages
_worker: list[threading.Thread] = []


def prefix() -> Path | None:
    """The folder runners read their bytecode from, once it is filled; None before that
    (or where it cannot be): a runner then compiles what it imports, as before."""
    with _lock:
        if not _ready:
            return None
        where = _ready[0]
        if (where / _MARK).is_file():
            return where
        # removed under a running grader (a cleaner of the temporary folder): a runner told
        # to bind it would not start; the next ``begin()`` fills it again
        _ready.clear()
        _worker.clear()
    log.warning("the runners' bytecode folder %s is gone: it is filled again", where)
    return None


def begin() -> None:
    """Fill the folder in the background, once a process (a fingerprint that matches the
    last fill skips the work); runners started meanwhile go without it."""
    with _lock:
        if _worker:
            return
        _worker.append(threading.Thread(target=_make_ready, daemon=True, name="bytecode"))
    _worker[0].start()


def wait(timeout_s: float | None = None) -> Path | None:
    """``prefix()``, after waiting for a fill under way (tests, tools)."""
    with _lock:
        worker = _worker[0] if _worker else None
    if worker is not None:
        worker.join(timeout_s)
    return prefix()


def folder() -> Path | None:
    """The grader's own bytecode folder in the temporary folder, made if missing; None if a
    folder of that name is not one only this user could have written. One for each
    checkout and Python: two checkouts' runner code is seen at one path in the sandbox."""
    from graders.shared.paths import REPO_ROOT

    which = hashlib.sha256(f"{REPO_ROOT.resolve()}\0{sys.executable}".encode()).hexdigest()
    path = Path(tempfile.gettempdir()) / f"graders-bytecode-{os.geteuid()}-{which[:12]}"
    try:
        path.mkdir(mode=0o755, exist_ok=True)
        st = os.lstat(path)
    except OSError as exc:
        log.info("no bytecode folder for the runners (%s): they compile what they import", exc)
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        log.warning("%s is not the grader's own folder (owner %d, mode %o): runners compile "
                    "what they import", path, st.st_uid, stat.S_IMODE(st.st_mode))
        return None
    if stat.S_IMODE(st.st_mode) != 0o755:  # a umask of 077 made it: job uids must enter it
        path.chmod(0o755)
    return path


def fingerprint(repo: Path) -> str:
    """What the fill depends on: this Python, the toolchain's versions, the runner's code."""
    digest = hashlib.sha256(f"{sys.version}\0{sys.executable}\n".encode())
    for package in ("numpy", "torch", "triton"):
        try:
            digest.update(f"{package} {importlib.metadata.version(package)}\n".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{package} -\n".encode())
    digest.update(triton_key.fingerprint(repo / "graders").encode())  # every file's stat
    return digest.hexdigest()


def _make_ready() -> None:
    from graders.shared.paths import REPO_ROOT

    where = folder()
    if where is None:
        return
    mark = where / _MARK
    want = fingerprint(REPO_ROOT)
    # one filler at a time: a server's slots are processes that start together, and each
    # waits for the first one's fill instead of doing it again beside it
    with open(where / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            filled = mark.read_text() == want
        except OSError:
            filled = False
        if not filled:
            if not _fill(where, REPO_ROOT):
                return
            try:
                mark.write_text(want)
            except OSError as exc:
                log.info("bytecode folder filled, not marked (%s): filled again next time",
                         exc)
    with _lock:
        _ready.append(where)


def _fill(where: Path, repo: Path) -> bool:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-X", f"pycache_prefix={where}", "-c", _FILL, str(repo),
             SANDBOX_ROOT], capture_output=True, text=True, timeout=FILL_TIMEOUT_S, env=env,
            cwd=where)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("the runners' bytecode was not compiled (%s): they compile what they "
                    "import", exc)
        return False
    if proc.returncode != 0:
        log.warning("the runners' bytecode was not compiled: they compile what they import "
                    "(%s)", proc.stderr.strip()[-400:])
        return False
    return True
