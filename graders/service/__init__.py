"""The service a grading slot offers, locally or across a fleet.

- ``slots``: a warm slot (its pool of runners) that grades one job at a time;
- ``worker``: ``python -m graders worker``, the slot behind a JSON-lines pipe;
- ``worker_client``: the server's side of that pipe (the standard library alone);
- ``remote_worker``: the thin Celery task of a remote worker (no database credentials);
- ``task_contract``: a task's fields and its signed token; ``worker_alive``: the liveness
  file a container's healthcheck reads.

May import: shared, engine, isolation. worker_client, task_contract and worker_alive take
the standard library and shared's plain modules alone: the server imports them, and the
server never imports numpy, torch or triton. Must never import it: engine, isolation,
shared, runner.
"""
