"""Grading plumbing: the jobs (claimed, put back, stored exactly once), the embedded
local pool of grading slots, the Celery dispatcher for remote workers, the graders'
command-line client, and the credentials that let a worker store its one result."""
