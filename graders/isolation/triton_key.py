"""Triton's own version key, worked out once per installed Triton and handed to its runners.

Triton keys every compile by ``triton_key()``: a hash of its compiler's sources and of
libtriton itself, hundreds of MB read. Each runner worked it out again at its first compile:
0.9 s of CPU on the H200 (a runner's profile, docs/benchmarks.md "Lanes"), 0.4 s on the CI's
CPU, for every runner of every grading. The runners read the same installed Triton as this
process, so one answer serves them all: it is worked out here, in a process of its own
(the grader does not import Triton), and sent with each runner's ``warm`` request
(graders/isolation/pool.py); the runner adopts it before anything compiles
(graders/runner/main.py), and before any submission is loaded. Where it cannot be worked
out, runners hash for themselves, as before.

Working it out still cost every grader process 0.6-0.9 s before its first runner could
warm up: every ``graders grade`` (a student's own check, each Gradescope or PrairieLearn
grading), every worker started. So the answer is also kept on disk, beside a fingerprint
of the installed Triton's files (each one's path, size and modification time: a reinstall or
an upgrade changes them), and read back while the fingerprint holds; ``begin()`` works it
out in the background while a runner starts. The file is the grader's own (its cache
folder, never bound into a sandbox), and a wrong key would cost nothing but compiles: each
runner's Triton cache starts empty but for the seed cache this same process made.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)
_PROGRAM = "from triton.runtime.cache import triton_key; print(triton_key())"
_MAX_KEY = 100_000
_lock = threading.Lock()
_known: list[str | None] = []  # empty: not tried yet
_worker: list[threading.Thread] = []


def triton_key() -> str | None:
    """The installed Triton's key, as its own ``triton_key()`` gives it; None if that failed."""
    with _lock:
        if not _known:
            _known.append(key_for(triton_root(), _work_out, cache_dir()))
        return _known[0]


def begin() -> None:
    """Start working the key out in the background (a runner starts meanwhile); the next
    ``triton_key()`` waits for it."""
    with _lock:
        if _known or _worker:
            return
        _worker.append(threading.Thread(target=triton_key, daemon=True, name="triton-key"))
    _worker[0].start()


def cache_dir() -> Path:
    """The grader's cache folder: $GRADERS_CACHE_DIR, else $XDG_CACHE_HOME/graders, else
    ~/.cache/graders."""
    if os.environ.get("GRADERS_CACHE_DIR"):
        return Path(os.environ["GRADERS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "graders"


def triton_root() -> Path | None:
    """The installed Triton package's folder, found without importing it."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    places = list(spec.submodule_search_locations or []) if spec else []
    return Path(places[0]) if places else None


def fingerprint(root: Path) -> str:
    """A hash of every file's path, size and modification time under ``root`` (a superset of
    what ``triton_key()`` reads: 349 files of Triton 3.6, 20 ms)."""
    digest = hashlib.sha256(str(root.resolve()).encode())
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            digest.update(f"{os.path.relpath(path, root)}\0{st.st_size}\0{st.st_mtime_ns}\n"
                          .encode())
    return digest.hexdigest()


def key_for(root: Path | None, work_out: Callable[[], str | None], cache: Path) -> str | None:
    """The key kept under ``cache`` for this fingerprint of ``root``, else ``work_out()``'s
    answer, then kept there (a folder that cannot be written keeps nothing)."""
    if root is None:
        return work_out()
    kept = cache / f"triton-key-{fingerprint(root)}.txt"
    try:
        key = kept.read_text()
        if usable(key):
            return key
    except OSError:
        pass
    key = work_out()
    if key is not None:
        _keep(kept, key)
    return key


def usable(key: str) -> bool:
    """A key a runner takes (graders/runner/main.py ``adopt_triton_key`` checks the same)."""
    return bool(key) and len(key) <= _MAX_KEY and key.isprintable()


def _keep(path: Path, key: str) -> None:
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False,
                                         prefix=".triton-key-") as tmp:
            tmp.write(key)
        os.replace(tmp.name, path)  # whole or not at all, for a reader beside it
        for stale in path.parent.glob("triton-key-*.txt"):  # an earlier Triton's
            if stale != path:
                stale.unlink(missing_ok=True)
    except OSError as exc:
        if tmp is not None:
            Path(tmp.name).unlink(missing_ok=True)
        log.info("Triton's key not kept in %s (%s): worked out again next time", path.parent,
                 exc)


def _work_out() -> str | None:
    try:
        proc = subprocess.run([sys.executable, "-I", "-c", _PROGRAM], capture_output=True,
                              text=True, timeout=120, env=dict(os.environ))
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("Triton's key not worked out (%s): each runner hashes for itself", exc)
        return None
    key = proc.stdout.strip()
    if proc.returncode != 0 or not usable(key):
        log.info("Triton's key not worked out: each runner hashes for itself (%s)",
                 proc.stderr.strip()[-300:])
        return None
    return key
