"""``/metrics`` in Prometheus' text format, for whoever watches the fleet.

The queue's figures and the workers in service are read from the database at each scrape
(it is the truth, shared by every server process, and survives restarts). What happens in a
process is counted there, as it happens: gradings stored (latency, submit-to-verdict, queue
wait, verdicts), work put back and why, refusals and why. With several server processes,
scrape each one: Prometheus sums the counters.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from sqlalchemy import func, select

from .models import Status, Submission, as_utc, utcnow
from .strength import same_secret

router = APIRouter(include_in_schema=False)
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


class QueueCollector:
    def __init__(self, app) -> None:
        self.app = app

    def collect(self):
        state = self.app.state
        with state.sessionmaker() as db:
            counts = dict(db.execute(select(Submission.status, func.count())
                                     .group_by(Submission.status)).all())
            oldest = db.scalar(select(func.min(Submission.created_at))
                               .where(Submission.status == Status.QUEUED))
        depth = GaugeMetricFamily("autograder_submissions", "Submissions by status",
                                  labels=["status"])
        for status in Status:
            depth.add_metric([status.value], counts.get(status, 0))
        yield depth
        age = 0.0
        if oldest is not None:
            age = max((utcnow() - as_utc(oldest)).total_seconds(), 0.0)
        yield GaugeMetricFamily("autograder_oldest_queued_seconds",
                                "Age of the oldest queued submission", value=age)
        up, down = _graders(state.dispatcher)
        graders = GaugeMetricFamily("autograder_graders", "Grading slots (local) or workers "
                                    "heard from in the last minute (celery), by their last "
                                    "word", labels=["state"])
        graders.add_metric(["in_service"], up)
        graders.add_metric(["out_of_service"], down)
        yield graders
        if hasattr(state.dispatcher, "broker_up"):
            yield GaugeMetricFamily("autograder_broker_up", "1 while this server's last "
                                    "publish to the broker went through",
                                    value=1.0 if state.dispatcher.broker_up else 0.0)


def _graders(dispatcher) -> tuple[int, int]:
    if hasattr(dispatcher, "workers"):
        return dispatcher.workers()
    slots = getattr(dispatcher, "slots", [])
    return (sum(1 for s in slots if s.in_service), sum(1 for s in slots if not s.in_service))


@router.get("/metrics")
def metrics(request: Request):
    # every scrape is a database query: with METRICS_TOKEN set, only its holder may ask
    token = request.app.state.settings.metrics_token
    if token is not None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not same_secret(given.strip(), token):
            return Response("METRICS_TOKEN is set: send it as 'Authorization: Bearer TOKEN'\n",
                            status_code=401, media_type="text/plain",
                            headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
    registry = CollectorRegistry()
    registry.register(QueueCollector(request.app))
    body = generate_latest(REGISTRY) + generate_latest(registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
