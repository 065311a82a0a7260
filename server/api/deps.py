"""What the JSON routers share: a body read as JSON, bounded in depth and checked for
text a database cannot store, and a submission as the API shows it."""

from __future__ import annotations

import json
from typing import Any

from fastapi import HTTPException, Request

from ..domain.formatting import iso, score_of
from ..domain.models import Submission
from ..domain.validation import Unstorable, check_unicode

MAX_JSON_DEPTH = 32  # no body of ours nests deeper than 4


def json_depth(text: bytes) -> int:
    """How deep arrays and objects nest, outside strings; a scan, not a parse."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in text:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def parse_json(raw: bytes) -> Any:
    """A JSON body, bounded in depth and checked for lone surrogates."""
    if json_depth(raw) > MAX_JSON_DEPTH:
        raise HTTPException(422, f"the JSON body nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise HTTPException(422, "the body is not valid JSON") from None
    try:
        return check_unicode(value)
    except Unstorable as exc:
        raise HTTPException(422, str(exc)) from None


async def read_json(request: Request) -> Any:
    return parse_json(await request.body())


def submission_json(request: Request, s: Submission, with_result: bool = True) -> dict[str, Any]:
    out = {
        "id": s.id, "exercise": s.exercise, "language": s.language, "filename": s.filename,
        "status": s.status.value, "verdict": s.verdict,
        "score": score_of(s.verdict, s.score), "late": s.late,
        "flag": s.flag.value, "attempts": s.attempts, "created_at": iso(s.created_at),
        # set when an earlier refused try decided `late` (server/domain/admission.py)
        "first_tried_at": iso(s.first_tried_at),
        "started_at": iso(s.started_at), "finished_at": iso(s.finished_at),
        "regrading": bool(s.regrade_pending),
        "url": submission_url(request, s.id),
    }
    if with_result:
        out["result"] = s.results[-1].result if s.results else None
    return out


def submission_url(request: Request, submission_id: int) -> str:
    """PUBLIC_URL + the path, or the path alone: never built from the client's Host header."""
    path = request.app.url_path_for("get_submission", submission_id=submission_id)
    public = request.app.state.settings.public_url.rstrip("/")
    return f"{public}{path}" if public else str(path)
