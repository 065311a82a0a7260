"""``/metrics`` in Prometheus' text format, for whoever watches the fleet.

The queue's figures and the workers in service are read from the database at each scrape
(it is the truth, shared by every server process, and survives restarts); what happens in
a process is counted there as it happens (server/core/metrics.py). With several server
processes, scrape each one: Prometheus sums the counters.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from sqlalchemy import func, select

from ..core.clock import as_utc, utcnow
from ..core.metrics import REGISTRY
from ..core.strength import same_secret
from ..domain.models import Status, Submission

router = APIRouter(include_in_schema=False)


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
