"""The contract between the server's Celery dispatcher and a remote grading worker.

Plain names only: the server imports this without the graders' heavy parts, and the
worker (graders/remote_worker.py) consumes what the server publishes under them.
"""

TASK_NAME = "graders.grade"  # one task per grading attempt
QUEUES = ("cpu", "cuda")  # routed by device kind; a worker consumes its own kind's queue
HEARTBEAT_S = 5.0  # a worker reports this often while it grades
# A task: {"id", "attempt", "exercise", "language", "source", "token", "params"}; params are
# the student's values of the exercise's [params] (graders/params.py), {} for none.


def queue_for(device: str) -> str:
    return device if device in QUEUES else "cuda"
