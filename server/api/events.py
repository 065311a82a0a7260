"""A waiting submission's progress as a stream (server-sent events), not a poll a second.

The submission page asked ``GET /api/submissions/{id}`` once a second while it waited: with
500 students at a deadline, 500 requests a second, each authenticated, each a thread and a
connection for its whole answer (issue 27). ``GET /api/submissions/{id}/events`` authenticates
once, then looks at the submission in a short read (a thread and a database connection only
for that read, none between) each time a change it shows is published (issue 39: it read
once a second, and 100 open streams were 100 reads a second): a change of its own, the queue
moving while it waits (server/domain/progress.py's FEED). It sends an event only when what
the page shows has changed (the queue position, the status, a check ended), and a
keep-alive comment otherwise; the page counts the seconds itself. The last event carries
the stored result, then the stream ends. Any server process can serve it: the progress is
on the row, and other processes' changes arrive through the change stamps.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, AsyncIterator

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from ..auth.deps import DbId, current_user, get_db, own_submission
from ..domain.models import Status, Submission, User
from ..domain.progress import FEED, QUEUE, progress_key
from .submissions import submission_view

router = APIRouter(prefix="/api/submissions", tags=["submissions"])
LOOK_EVERY_S = 1.0  # at most one read a second, however often it is woken
KEEP_ALIVE_S = 15.0  # a comment line, so that proxies do not close a quiet stream
# a read even when nothing was published: a safety net under the feed, not its clock
LOOK_ANYWAY_S = 60.0
STREAM_FOR_S = 600.0  # then the page opens a new one (and is authenticated again)
DONE = (Status.GRADED, Status.ERROR)


def _look(request: Request, submission_id: int) -> dict[str, Any]:
    with request.app.state.sessionmaker() as db:
        s = db.get(Submission, submission_id)
        return submission_view(request, db, s, with_result=s.status in DONE)


def _shown(body: dict[str, Any]) -> tuple:
    """What the page shows, without the seconds (the page counts those)."""
    p = body.get("progress") or {}
    return (body["status"], p.get("queue_position"), len(p.get("checks") or []))


async def _events(request: Request, submission_id: int) -> AsyncIterator[str]:
    began = time.monotonic()
    keys = (progress_key(submission_id), QUEUE)
    shown = None
    while time.monotonic() - began < STREAM_FOR_S:
        seen = FEED.versions(keys)  # before the read: a change during it wakes the wait
        body = await run_in_threadpool(_look, request, submission_id)
        looked = time.monotonic()
        if _shown(body) != shown:
            shown = _shown(body)
            yield f"data: {json.dumps(body, separators=(',', ':'))}\n\n"
            if body["status"] in {s.value for s in DONE}:
                return
        # a queued submission moves up whenever another leaves the queue; a running one
        # changes only by itself
        watched = len(keys) if shown[0] == Status.QUEUED.value else 1
        while not await FEED.wait(keys[:watched], seen[:watched], KEEP_ALIVE_S):
            if await request.is_disconnected():
                return
            if time.monotonic() - looked >= LOOK_ANYWAY_S:
                break
            yield ": still waiting\n\n"
        # woken: read once the second since the last read is over
        await asyncio.sleep(max(0.0, LOOK_EVERY_S - (time.monotonic() - looked)))


@router.get("/{submission_id}/events")
def submission_events(submission_id: DbId, request: Request,
                      user: User = Depends(current_user),
                      db: Session = Depends(get_db, scope="function")):
    """``text/event-stream``: one ``data:`` line (the submission's JSON, as ``GET
    /api/submissions/{id}`` answers it) each time its progress changes; the last has its
    result, then the stream ends."""
    own_submission(db, user, submission_id)  # 404 unless it is the reader's (or they teach)
    return StreamingResponse(_events(request, submission_id), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
