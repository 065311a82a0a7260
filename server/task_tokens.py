"""The credential a remote worker reports with: scoped to one task, one attempt.

A worker holds no database URL and no instructor token. Each task it receives carries
``token = HMAC(secret, "submission:attempt")``, made by the server under a secret that
never leaves it. With it the worker may start, keep alive and answer that one grading,
once: a forged token is refused, and a replayed result finds the attempt already over.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from .settings import REPO_ROOT, Settings
from .strength import same_secret

SECRET_FILE = REPO_ROOT / "var" / "task_secret"


def load_secret(settings: Settings, path: Path = SECRET_FILE) -> bytes:
    """TASK_SECRET, or one made once and kept (0600) so that a restarted server still
    accepts the results of the tasks it published before."""
    if settings.task_secret:
        return settings.task_secret.encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes().strip()
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    return path.read_bytes().strip()


def token_for(secret: bytes, submission_id: int, attempt: int) -> str:
    return hmac.new(secret, f"{submission_id}:{attempt}".encode(), hashlib.sha256).hexdigest()


def valid(secret: bytes, submission_id: int, attempt: int, token: str) -> bool:
    return same_secret(token or "", token_for(secret, submission_id, attempt))
