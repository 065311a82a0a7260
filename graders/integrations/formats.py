"""A grading's JSON (GradeResult.to_json) in each platform's results.json format.

One test per check, its message as the test's output (with the worst row's table for a
failed check), the total, and for a verdict that ended the run (compile_error with the
line, timeout, …) the engine's message at the top, where a student reads first.
"""

from __future__ import annotations

from typing import Any

from ..report import dump_table

# verdicts where a check's own message is the whole story; any other ended the run early
_CHECK_VERDICTS = {"passed", "failed"}
NOT_YOUR_FAULT = ("This is not your fault and costs you nothing: course staff have the log. "
                  "Submit again later.")
CPU_NOTE = ("graded on Triton's CPU interpreter: correctness only, no timing (a GPU "
            "grading adds performance points and a leaderboard entry)")
OUTPUT_KEEP_CHARS = 8000  # of the submission's own stdout/stderr, shown under the summary


def _check_output(check: dict[str, Any]) -> str:
    lines = [check.get("message", "")]  # an unrun check's says "not run: <verdict>"
    if check.get("dump"):
        lines += [line.strip("\n") for line in dump_table(check["dump"])]
    return "\n".join(line for line in lines if line)


def summary(result: dict[str, Any], confinement: str) -> str:
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


def gradescope(result: dict[str, Any], confinement: str) -> dict[str, Any]:
    tests = [{"name": c["name"], "score": c["points"], "max_score": c["max_points"],
              "status": "passed" if c["passed"] else "failed", "output": _check_output(c),
              "visibility": "visible"} for c in result.get("checks", [])]
    out = {"score": result.get("score", 0.0), "output": summary(result, confinement),
           "tests": tests, "visibility": "visible",
           "execution_time": round(result.get("duration_s", 0.0)),
           "extra_data": {"verdict": result.get("verdict"), "line": result.get("line"),
                          "max_score": result.get("max_score"),
                          "grader_version": result.get("grader_version")}}
    board = leaderboard(result)
    if board is not None:
        out["leaderboard"] = board
    return out


def gradescope_refusal(output: str) -> dict[str, Any]:
    """No grading happened (unconfinable, or no file to grade): score 0 and why."""
    return {"score": 0.0, "output": output, "tests": [], "visibility": "visible"}


def prairielearn(result: dict[str, Any], confinement: str) -> dict[str, Any]:
    max_score = result.get("max_score") or 100
    tests = [{"name": c["name"], "points": c["points"], "max_points": c["max_points"],
              "message": ("passed" if c["passed"] else "failed") if c.get("ran", True)
              else "not run", "output": _check_output(c)} for c in result.get("checks", [])]
    verdict = result.get("verdict", "grader_error")
    return {
        # a grader fault is not gradable: PrairieLearn then charges the student no attempt
        "gradable": verdict != "grader_error",
        "score": max(0.0, min(1.0, result.get("score", 0.0) / max_score)),
        "message": summary(result, confinement),
        "output": result.get("output") or "",
        "tests": tests,
    }


def prairielearn_refusal(message: str, gradable: bool) -> dict[str, Any]:
    return {"gradable": gradable, "score": 0.0, "message": message, "tests": []}
