"""A grading as GitHub Actions workflow commands: annotations on the student's own file.

`::error file=F,line=L,title=T::message` puts a red mark on the file (and line) in the
pull request and the run's summary; `::notice` gives the verdict and score. Then the full
text report follows in a collapsed group, with workflow commands switched off around it:
the report quotes what the student's program printed, and a printed `::` line must not
become a command. Where GitHub gives a step summary file (``$GITHUB_STEP_SUMMARY``), the CLI
appends the grading's row of a score table to it (``summary_row``).
"""

from __future__ import annotations

import os
import secrets

from graders.engine.report import render as render_text
from graders.engine.results import GradeResult


def render_github(result: GradeResult, file: str) -> str:
    path = annotation_path(file)
    lines = []
    failed = [c for c in result.checks if c.ran and not c.passed]
    if (run_error := result.run_error()) is not None:  # a failed check has its own below
        lines.append(command("error", run_error, file=path, line=result.line,
                             title=f"{result.exercise}: {result.verdict.value}"))
    for check in failed:
        lines.append(command("error", check.message, file=path, line=check.line or result.line,
                             title=f"{result.exercise}: {check.name} "
                                   f"{check.points:g}/{check.max_points:g}"))
    passed = sum(1 for c in result.checks if c.passed)
    lines.append(command(
        "notice", f"verdict {result.verdict.value}, score {result.score:g}/"
                  f"{result.max_score:g}, {passed} of {len(result.checks)} checks passed",
        file=path, title=f"{result.exercise}: {result.verdict.value}"))
    token = secrets.token_hex(16)  # unguessable, so the quoted text cannot switch back on
    lines += ["::group::the full report", f"::stop-commands::{token}", render_text(result),
              f"::{token}::", "::endgroup::"]
    return "\n".join(lines)


def command(name: str, message: str, **properties: str | int | None) -> str:
    """One workflow command; properties that are None are left out."""
    props = ",".join(f"{key}={escape_property(str(value))}"
                     for key, value in properties.items() if value is not None)
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def escape_data(value: str) -> str:
    """GitHub's escaping of a command's message: %, CR and LF."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """A property value also ends at ':' and ',', so those are escaped too."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def annotation_path(file: str) -> str:
    """GitHub places an annotation by the file's path from the repository's root. The CLI
    is normally run from that root with a relative path; an absolute path inside the
    checkout ($GITHUB_WORKSPACE, set on every runner) is made relative to it."""
    workspace = os.environ.get("GITHUB_WORKSPACE")
    path = os.path.normpath(file)
    if workspace and os.path.isabs(path):
        relative = os.path.relpath(path, os.path.normpath(workspace))
        if not relative.startswith(".."):
            path = relative
    return path.replace(os.sep, "/")


SUMMARY_HEADER = "| exercise | verdict | score | failed checks |\n|---|---|---|---|\n"


def summary_row(result: GradeResult) -> str:
    """The grading as a row of the run's score table (markdown), under its header when it
    is the summary's first: the exercise, the verdict, the score, what failed."""
    failed = [f"{c.name} ({c.points:g}/{c.max_points:g})" for c in result.checks
              if c.ran and not c.passed]
    why = (result.run_error() or "none").splitlines()[0][:160]
    cells = [result.exercise, result.verdict.value, f"{result.score:g}/{result.max_score:g}",
             ", ".join(failed) or why]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |\n"


def append_step_summary(result: GradeResult) -> None:
    """Add the grading's row to GitHub's step summary, when the run has one."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as summary:
        if summary.tell() == 0:
            summary.write(SUMMARY_HEADER)
        summary.write(summary_row(result))
