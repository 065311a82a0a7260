"""The contract between the server's Celery dispatcher and a remote grading worker.

Plain names only: the server imports this without the graders' heavy parts, and the
worker (graders/service/remote_worker.py) consumes what the server publishes under them.
"""

import hashlib
import hmac

TASK_NAME = "graders.grade"  # one task per grading attempt
QUEUES = ("cpu", "cuda")  # routed by device kind; a worker consumes its own kind's queue
HEARTBEAT_S = 5.0  # a worker reports this often while it grades
# A task: {"id", "attempt", "exercise", "language", "source", "params"}; params are the student's
# values of the exercise's [params] (graders/engine/params.py), {} for none. It carries no
# credential: whoever can read the broker must not be able to report a result (issue 27).


def task_token(secret: bytes, submission_id: int, attempt: int) -> str:
    """The credential of one grading attempt (``X-Task-Token``): HMAC(TASK_SECRET,
    "submission:attempt"). The server and its workers hold TASK_SECRET; the broker never
    sees it or a token made with it."""
    return hmac.new(secret, f"{submission_id}:{attempt}".encode(), hashlib.sha256).hexdigest()


def queue_for(device: str) -> str:
    return device if device in QUEUES else "cuda"
