"""The shapes `python -m graders grade --format` prints a result in.

text is for a person (graders/engine/report.py), json is the server's contract, junit is for CI
test reports, github is GitHub Actions' workflow commands (annotations on the student's
file). Each renderer takes the result and the path the student gave, and returns the
whole output; none of them prints, so the CLI alone decides what reaches stdout.
"""

from __future__ import annotations

import json
from typing import Callable

from graders.engine.report import render as render_text
from graders.engine.results import GradeResult
from graders.formats.github import render_github
from graders.formats.junit import render_junit

FORMATS = ("text", "json", "junit", "github")


def render_json(result: GradeResult, file: str, slot: dict | None = None) -> str:
    """The result as the server stores it; the slot's health rides along for the server's
    pool (it is not part of the result)."""
    out = result.to_json()
    if slot is not None:
        out["slot"] = slot
    return json.dumps(out, indent=2)


_RENDERERS: dict[str, Callable[[GradeResult, str], str]] = {
    "text": lambda result, file: render_text(result),
    "junit": render_junit,
    "github": render_github,
}


def render_as(fmt: str, result: GradeResult, file: str, slot: dict | None = None) -> str:
    if fmt == "json":
        return render_json(result, file, slot)
    return _RENDERERS[fmt](result, file)
