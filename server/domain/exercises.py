"""An exercise as the graders describe it (``python -m graders list --json``): what the
server knows of an exercise, and all it needs, without importing the graders' checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ExerciseInfo:
    name: str
    title: str
    summary: str
    languages: list[str]
    entry_points: list[str]
    deadline: str | None
    statement: str
    skeletons: dict[str, dict[str, str]]
    checks: list[dict[str, Any]] = field(default_factory=list)
    # per-student parameters: [{name, choices, default, description}] (graders/engine/params.py)
    params: list[dict[str, Any]] = field(default_factory=list)
