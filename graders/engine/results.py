"""The typed result of a grading run and its JSON form (the contract with the server)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from graders import GRADER_VERSION
from graders.shared.vocabulary import Verdict


@dataclass
class CheckResult:
    name: str
    passed: bool
    message: str
    points: float
    max_points: float
    dump: dict[str, Any] | None = None
    ran: bool = True  # False when an earlier problem stopped the run before this check
    line: int | None = None  # the student's line, where the failure has one (a raise)
    # the run ended in this check (the result's verdict and message say why): it found it,
    # and gave no result of its own (ran stays False, as for the checks after it)
    stopped: bool = False

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "passed": self.passed, "message": self.message,
               "points": self.points, "max_points": self.max_points}
        if self.dump is not None:
            out["dump"] = self.dump
        if not self.ran:
            out["ran"] = False
        if self.line is not None:
            out["line"] = self.line
        if self.stopped:
            out["stopped"] = True
        return out


@dataclass
class GradeResult:
    exercise: str
    language: str
    device: str
    verdict: Verdict
    score: float
    checks: list[CheckResult] = field(default_factory=list)
    message: str = ""  # what went wrong for verdicts that stop the run
    line: int | None = None  # the student's line, where there is one
    device_name: str = ""
    versions: dict[str, Any] = field(default_factory=dict)
    output: str = ""  # the submission's own stdout/stderr, capped
    output_dropped_bytes: int = 0
    duration_s: float = 0.0
    sandboxed: bool = True
    performance: dict[str, Any] | None = None
    max_score: float = 100.0  # 100 for the checks, plus the performance points on a GPU
    flag: str | None = None  # why an instructor should look (an impossible timing)
    # where the time went, in seconds: runner start, load, each check, timing (for the
    # operator; a warm runner's start reads 0)
    phases: dict[str, Any] = field(default_factory=dict)
    # the exercise's per-submission parameters this grading used (graders/engine/params.py)
    params: dict[str, Any] = field(default_factory=dict)
    grader_version: str = GRADER_VERSION

    def run_error(self) -> str | None:
        """What went wrong with the run itself, beyond failed checks: a verdict that ended
        it, or "failed" with no failed check to show for it. None when the checks say all
        (the CLI's JUnit and GitHub formats give it an entry of its own)."""
        failed = any(c.ran and not c.passed for c in self.checks)
        if self.verdict in (Verdict.PASSED, Verdict.COMPILED) or \
                (self.verdict is Verdict.FAILED and failed):
            return None
        return self.message or f"the run ended: {self.verdict.value}"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdict"] = self.verdict.value
        out["checks"] = [c.to_json() for c in self.checks]
        return out
