"""One submission's record in the load bench: its entry of the mix, and what the server's
API said of it (status, verdict, the queue's timestamps, the grader's JSON)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from graders.bench.load_mix import MixEntry

DONE = ("graded", "error")  # a submission's final states


def parse_time(value: str | None) -> datetime.datetime | None:
    return datetime.datetime.fromisoformat(value) if value else None


@dataclass
class Record:
    entry: MixEntry
    id: int
    status: str = "queued"
    verdict: str | None = None
    score: float | None = None
    created_at: datetime.datetime | None = None
    started_at: datetime.datetime | None = None
    finished_at: datetime.datetime | None = None
    result: dict | None = None
    # the student's own exercise parameters written into the file sent ({} for none)
    params: dict = field(default_factory=dict)

    def update(self, row: dict) -> None:
        """From the API's submission JSON."""
        self.status, self.verdict, self.score = row["status"], row["verdict"], row["score"]
        self.created_at = parse_time(row["created_at"])
        self.started_at = parse_time(row["started_at"])
        self.finished_at = parse_time(row["finished_at"])
        if row.get("result") is not None:
            self.result = row["result"]

    def to_json(self) -> dict:
        """For the bench's results file: the file, its class, the queue's times, the result."""
        return {"file": self.entry.label, "exercise": self.entry.exercise,
                "class": self.entry.klass, "status": self.status, "verdict": self.verdict,
                "latency_s": self.latency_s, "wait_s": self.wait_s, "result": self.result}

    @property
    def done(self) -> bool:
        return self.status in DONE and self.finished_at is not None

    @property
    def latency_s(self) -> float | None:
        """The slot's claim to the stored result."""
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

    @property
    def answer_s(self) -> float | None:
        """Stored to graded (created_at to finished_at): what the student waits for."""
        if self.created_at and self.finished_at:
            return (self.finished_at - self.created_at).total_seconds()
        return None

    @property
    def wait_s(self) -> float | None:
        if self.created_at and self.started_at:
            return (self.started_at - self.created_at).total_seconds()
        return None

    @property
    def grader_s(self) -> float | None:
        """The grader's own duration (runner start to verdict), from its JSON."""
        return (self.result or {}).get("duration_s")
