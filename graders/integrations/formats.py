"""A grading's JSON (GradeResult.to_json) in each platform's results.json format.

One test per check, its message as the test's output (with the worst row's table for a
failed check), the total, and for a verdict that ended the run (compile_error with the
line, timeout, …) the engine's message at the top, where a student reads first.

Everything here is plain text, and is declared so: Gradescope renders an output as HTML
unless told otherwise (its default ``simple_format``), and a student's printed
``<img onerror=…>`` must reach the instructor's page as the characters it is.
PrairieLearn's results element escapes what it shows.
"""

from __future__ import annotations

from typing import Any

from graders.engine.report import dump_table

# verdicts where a check's own message is the whole story; any other ended the run early
_CHECK_VERDICTS = {"passed", "failed"}
NOT_YOUR_FAULT = ("This is not your fault and costs you nothing: course staff have the log. "
                  "Submit again later.")
CPU_NOTE = ("graded on Triton's CPU interpreter: correctness only, no timing (a GPU "
            "grading adds performance points and a leaderboard entry)")
OUTPUT_KEEP_CHARS = 8000  # of the submission's own stdout/stderr, shown under the summary
# Gradescope: every text field as text (its default for `output` renders HTML)
GRADESCOPE_TEXT = {"output_format": "text", "test_output_format": "text",
                   "test_name_format": "text"}
KEPT_PREVIOUS = ("The autograder failed on this submission. This is not your fault; course "
                 "staff have the log. Your previous result stands, shown below; submit again "
                 "later.")
# What PrairieLearn calls a format error: the student must fix it before any check can run,
# and it costs no attempt. A file that parses but fails to import, or lacks an entry
# point, ran and broke the contract: that is graded (compile_error, 0 points).
FORMAT_ERRORS = ("SyntaxError", "IndentationError", "TabError")


def _check_output(check: dict[str, Any]) -> str:
    lines = [check.get("message", "")]  # an unrun check's says "not run: <verdict>"
    if check.get("dump"):
        lines += [line.strip("\n") for line in dump_table(check["dump"])]
    return "\n".join(line for line in lines if line)


def _params_line(result: dict[str, Any], source: str) -> str:
    """Which values of the exercise's parameters were this student's, and from where."""
    values = result.get("params") or {}
    if not values or not source:
        return ""
    shown = ", ".join(f"{name} = {value}" for name, value in values.items())
    return f"Your parameters ({source}): {shown}."


def summary(result: dict[str, Any], confinement: str, params_source: str = "") -> str:
    """What the student reads above the tests."""
    verdict = result.get("verdict", "grader_error")
    head = f"{verdict}: {result.get('score', 0):g}/{result.get('max_score', 100):g}"
    lines = [head]
    if verdict not in _CHECK_VERDICTS and result.get("message"):
        where = f" (line {result['line']} of your file)" if result.get("line") and \
            f"line {result['line']}" not in result["message"] else ""
        lines.append(result["message"] + where)
    if verdict == "grader_error":
        lines.append(NOT_YOUR_FAULT)
    if params := _params_line(result, params_source):
        lines.append(params)
    if result.get("device") == "cpu":
        lines.append(CPU_NOTE + ".")
    lines.append(f"Your code ran confined: {confinement}.")
    own = result.get("output") or ""
    if own:
        lines.append("What your code printed (first part):\n" + own[:OUTPUT_KEEP_CHARS])
    return "\n".join(lines)


def leaderboard(result: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Gradescope's leaderboard columns, only where the grading was timed (a GPU)."""
    perf = result.get("performance") or {}
    if "fraction_of_copy" not in perf or result.get("verdict") != "passed":
        return None  # the CPU interpreter times nothing: no entry rather than a made-up one
    return [{"name": "% of copy", "value": round(100 * perf["fraction_of_copy"], 1)},
            {"name": "GB/s", "value": round(perf.get("gbs", 0.0), 1)},
            {"name": "score", "value": result.get("score", 0)}]


def gradescope(result: dict[str, Any], confinement: str, params_source: str = "") -> dict[str, Any]:
    """Each check a test, numbered in the spec's order, tagged with its exercise (a course
    that puts several exercises on one assignment can filter by it), and visible at once:
    the checks' messages are the teaching, and nothing in them is secret (every input is
    drawn afresh for each grading)."""
    exercise = result.get("exercise", "")
    tests = [{"name": c["name"], "name_format": "text", "number": str(i),
              "score": c["points"], "max_score": c["max_points"],
              "status": "passed" if c["passed"] else "failed",
              "output": _check_output(c), "output_format": "text",
              "tags": [exercise] if exercise else [], "visibility": "visible"}
             for i, c in enumerate(result.get("checks", []), 1)]
    out = {"score": result.get("score", 0.0),
           "output": summary(result, confinement, params_source), **GRADESCOPE_TEXT,
           "tests": tests, "visibility": "visible", "stdout_visibility": "hidden",
           "execution_time": round(result.get("duration_s", 0.0)),
           "extra_data": {"verdict": result.get("verdict"), "line": result.get("line"),
                          "max_score": result.get("max_score"), "params": result.get("params"),
                          "grader_version": result.get("grader_version")}}
    board = leaderboard(result)
    if board is not None:
        out["leaderboard"] = board
    return out


def gradescope_refusal(output: str) -> dict[str, Any]:
    """No grading happened (unconfinable, or no file to grade): score 0 and why."""
    return {"score": 0.0, "output": output, **GRADESCOPE_TEXT, "tests": [],
            "visibility": "visible", "stdout_visibility": "hidden"}


def gradescope_fault(message: str, previous: dict[str, Any] | None) -> dict[str, Any]:
    """The autograder failed on this submission: the student's last result stands
    (Gradescope's submission_metadata.json hands it over), rather than a 0 for nothing
    they did; with no earlier result, 0 and why."""
    if not isinstance(previous, dict) or not isinstance(previous.get("tests", []), list):
        return gradescope_refusal(f"{message}\n{NOT_YOUR_FAULT}")
    kept = dict(previous, **GRADESCOPE_TEXT)
    kept["output"] = f"{KEPT_PREVIOUS}\n\n{previous.get('output', '')}"
    kept.pop("leaderboard", None)  # a board entry is for a grading that happened
    return kept


def prairielearn(result: dict[str, Any], confinement: str, descriptions: dict[str, str],
                 params_source: str = "") -> dict[str, Any]:
    """A syntax error is a format error (``gradable: false``, no attempt used); a grader
    fault is not gradable either; every other verdict is the student's grade."""
    verdict = result.get("verdict", "grader_error")
    message = summary(result, confinement, params_source)
    if verdict == "compile_error" and str(result.get("message", "")).startswith(FORMAT_ERRORS):
        return prairielearn_refusal(message, gradable=False,
                                    format_errors=[str(result["message"]).splitlines()[0]])
    max_score = result.get("max_score") or 100
    tests = [{"name": c["name"], "description": descriptions.get(c["name"], ""),
              "points": c["points"], "max_points": c["max_points"],
              "message": ("passed" if c["passed"] else "failed") if c.get("ran", True)
              else "not run", "output": _check_output(c)} for c in result.get("checks", [])]
    return {
        # a grader fault is not gradable: PrairieLearn then charges the student no attempt
        "gradable": verdict != "grader_error",
        "score": max(0.0, min(1.0, result.get("score", 0.0) / max_score)),
        "message": message,
        "output": result.get("output") or "",
        "tests": tests,
    }


def prairielearn_refusal(message: str, gradable: bool,
                         format_errors: list[str] | None = None) -> dict[str, Any]:
    out = {"gradable": gradable, "score": 0.0, "message": message, "tests": []}
    if format_errors:
        out["format_errors"] = format_errors
    return out
