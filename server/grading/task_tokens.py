"""The credential a remote worker reports with: scoped to one task, one attempt.

A worker holds no database URL and no instructor token. It reports on a task with
``token = HMAC(TASK_SECRET, "submission:attempt")`` (graders/task_contract.task_token),
which it makes itself: the server and the workers hold TASK_SECRET, and the task in the
broker carries no token, so that a reader of the broker cannot report a result. With it
the worker may start, keep alive and answer that one grading, once: a forged token is
refused, and a replayed result finds the attempt already over.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from graders.service.task_contract import task_token

from ..core.settings import REPO_ROOT, Settings
from ..core.strength import same_secret

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
    return task_token(secret, submission_id, attempt)


def valid(secret: bytes, submission_id: int, attempt: int, token: str) -> bool:
    return same_secret(token or "", token_for(secret, submission_id, attempt))
