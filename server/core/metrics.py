"""What a server process counts, as it happens, for ``/metrics`` (server/api/metrics.py).

Gradings stored (latency, submit-to-verdict, queue wait, verdicts), work put back and why,
refusals and why: each counted in the process where it happens, by whichever layer it
happens in. The queue's figures are read from the database at each scrape instead.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from .clock import as_utc

REGISTRY = CollectorRegistry()
GRADING_SECONDS = Histogram(
    "autograder_grading_seconds", "A grading, from its start on a grader to its stored result",
    ["device"], buckets=(1, 2, 4, 6, 8, 10, 15, 20, 30, 60, 120, 300, 900), registry=REGISTRY)
VERDICTS = Counter("autograder_verdicts", "Stored gradings by verdict", ["verdict"],
                   registry=REGISTRY)
_WAITS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600)
SUBMIT_TO_VERDICT_SECONDS = Histogram(
    "autograder_submit_to_verdict_seconds", "A submission, from its acceptance to its stored "
    "verdict (what the student waits)", buckets=_WAITS, registry=REGISTRY)
QUEUE_WAIT_SECONDS = Histogram(
    "autograder_queue_wait_seconds", "A grading's wait, from the submission's acceptance to "
    "the start of the grading that answered it", buckets=_WAITS, registry=REGISTRY)
REQUEUES = Counter(
    "autograder_requeues", "Gradings put back to wait, by why: grader_fault (a grader "
    "error, retried), broker_lost (published, never started), lease_lost (its worker died "
    "or fell silent)", ["reason"], registry=REGISTRY)
ENDED_LOST = Counter(
    "autograder_ended_after_lost_leases", "Submissions ended as error because they lost their "
    "worker MAX_GRADER_ATTEMPTS times", registry=REGISTRY)
REFUSALS = Counter(
    "autograder_refusals", "Submissions refused, by why: in_flight, per_hour, queue_full, "
    "invalid (the file or request itself)", ["reason"], registry=REGISTRY)


def observe(result: dict, started_at, finished_at, created_at=None) -> None:
    VERDICTS.labels(str(result.get("verdict", "?"))).inc()
    if started_at is not None and finished_at is not None:
        seconds = (finished_at - as_utc(started_at)).total_seconds()
        GRADING_SECONDS.labels(str(result.get("device", "?"))).observe(max(seconds, 0.0))
    if created_at is not None and finished_at is not None:
        waited = (finished_at - as_utc(created_at)).total_seconds()
        SUBMIT_TO_VERDICT_SECONDS.observe(max(waited, 0.0))
        if started_at is not None:
            QUEUE_WAIT_SECONDS.observe(max((as_utc(started_at) - as_utc(created_at))
                                           .total_seconds(), 0.0))
