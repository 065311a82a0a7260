"""Grading plumbing: the jobs (claimed, put back, stored exactly once), the embedded
local pool of grading slots, the Celery dispatcher for remote workers, the graders'
command-line client, the credentials that let a worker store its one result, and what
keeps a grade from being lost: the grading's own database pool, the outbox of finished
results, and the reaper that renews leases and puts back work whose grader died."""
