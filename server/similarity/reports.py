"""Similarity reports, from the server's side: start a run in a process of its own
(server/similarity/run.py), and read the latest report of an exercise. Nothing here
imports the detector: the API's threads only store a row and start a process.

A run is stored before it is acknowledged (a "running" row), so that a second click while
it runs returns the same run, and a run whose process died is seen as such after
``STALE_S`` and may be started again.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..core.clock import as_utc, utcnow
from ..core.settings import REPO_ROOT
from ..domain.models import SimilarityReport
from .constants import FLAGGED, FLOOR

log = logging.getLogger("server.similarity")
STALE_S = 600.0  # a run still "running" after this is taken for dead

__all__ = ["FLAGGED", "FLOOR", "latest", "start", "to_json"]


def latest(db: Session, exercise: str) -> SimilarityReport | None:
    return db.scalars(select(SimilarityReport).where(SimilarityReport.exercise == exercise)
                      .order_by(SimilarityReport.id.desc()).limit(1)).first()


def running(report: SimilarityReport | None) -> bool:
    return report is not None and report.status == "running" and \
        utcnow() - as_utc(report.started_at) < timedelta(seconds=STALE_S)


def start(db: Session, exercise: str, database_url: str,
          skeletons: dict[str, str]) -> SimilarityReport:
    """The exercise's run: the one still running, or a new one, stored, then started."""
    current = latest(db, exercise)
    if running(current):
        return current
    report = SimilarityReport(exercise=exercise, status="running", started_at=utcnow(),
                              submissions=0, message="")
    db.add(report)
    db.commit()
    job = {"report_id": report.id, "database_url": database_url, "skeletons": skeletons}
    try:
        # copydetect fingerprints with Python's hash(), salted per process: a fixed seed
        # makes a run over the same files mark the same spans every time
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        proc = subprocess.Popen([sys.executable, "-m", "server.similarity.run"], cwd=REPO_ROOT,
                                stdin=subprocess.PIPE, start_new_session=True, text=True,
                                env=env)
        proc.stdin.write(json.dumps(job) + "\n")  # the URL's password never in argv
        proc.stdin.close()
        # reaped when it ends (no zombie left to the server); it outlives a server restart
        # in its own session and still stores its report
        threading.Thread(target=proc.wait, name=f"similarity-{report.id}", daemon=True).start()
    except OSError as exc:
        report.status, report.message = "error", f"could not start the run: {exc}"[:500]
        report.finished_at = utcnow()
        db.commit()
        log.error("similarity run for %s not started: %s", exercise, exc)
    return report


def to_json(report: SimilarityReport) -> dict:
    return {"id": report.id, "exercise": report.exercise, "status": report.status,
            "started_at": as_utc(report.started_at).isoformat(),
            "finished_at": as_utc(report.finished_at).isoformat() if report.finished_at
            else None,
            "submissions": report.submissions, "message": report.message,
            "flagged_at": FLAGGED, "listed_from": FLOOR, "pairs": report.pairs or []}


def skeletons_of(info) -> dict[str, str]:
    """Each language's skeleton text: the boilerplate no match may count."""
    return {language: skeleton.get("source", "") for language, skeleton in info.skeletons.items()}
