"""How scores and times are written, the same in the API, the pages and the CSV."""

from __future__ import annotations

from datetime import datetime

from graders.shared.vocabulary import Verdict

from ..core.clock import as_utc

# Verdicts that give no score: a HIP file graded without a GPU is only compiled, nothing
# ran. Its stored 0 is no grade: it never counts on the board or in the CSV, and is shown
# as "not scored here", never as a 0 a student earned.
NOT_SCORED = frozenset({Verdict.COMPILED.value})


def score_of(verdict: str | None, score: float | None) -> float | None:
    """The score as the API gives it: none for a verdict that gives no score."""
    return None if verdict in NOT_SCORED else score


def iso(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with its offset (+00:00): every time the API and the CSV write."""
    if value is None:
        return None
    return as_utc(value).isoformat()


def readable(value: datetime) -> str:
    """A time as the pages write it: UTC, to the second (two submissions in one minute,
    or one a few seconds past a deadline, must read apart), said to be UTC."""
    return as_utc(value).strftime("%Y-%m-%d %H:%M:%S UTC")
