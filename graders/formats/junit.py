"""A grading as a JUnit XML report, the format CI systems draw test tables from.

One <testsuite> per grading (named after the exercise), one <testcase> per check. A check
that did not run is <skipped>. A verdict that ended the run (compile_error, timeout, …) is
an extra <testcase> named after the verdict that carries an <error>: a report whose checks
were all skipped would otherwise read as green.

The points are where CI systems show them: the common reporters (GitHub's test-report
actions, GitLab, Jenkins) show a case's name, its outcome and message and its <system-out>,
but not <properties>. So a check's case is named with the points it is worth
("poisoned_row [20 points]": a name that stays the same from run to run, so a reporter's
history follows the check), and its <system-out> says what it earned with the check's
message; the properties stay, for tools that read them. A failed case names the student's
file and, where the grader knows one, the line (`file`, `line`), as the verdict's case does.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from graders.engine.report import dump_table
from graders.engine.results import CheckResult, GradeResult

# XML 1.0 cannot hold most control characters at all, escaped or not, and a student's
# printed output or an exception text may contain them: show them as \xNN instead.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def render_junit(result: GradeResult, file: str) -> str:
    suite = _suite(result, file)
    root = ET.Element("testsuites", {"name": "graders"})
    for key in ("tests", "failures", "errors", "skipped", "time"):
        root.set(key, suite.get(key))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def _suite(result: GradeResult, file: str) -> ET.Element:
    suite = ET.Element("testsuite", {"name": result.exercise})
    _properties(suite, verdict=result.verdict.value, score=_num(result.score),
                max_score=_num(result.max_score), language=result.language,
                device=result.device_name or result.device, file=file,
                sandboxed=str(result.sandboxed).lower(), grader_version=result.grader_version)
    seconds = result.phases.get("checks", {})
    for check in result.checks:
        suite.append(_check_case(result, check, file, seconds.get(check.name, 0.0)))
    if result.performance:
        suite.append(_performance_case(result.exercise, result.performance))
    if (run_error := result.run_error()) is not None:  # failed checks are cases of their own
        suite.append(_verdict_case(result, file, run_error))
    if result.output:
        ET.SubElement(suite, "system-out").text = _text(result.output)
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    suite.set("errors", str(sum(1 for c in cases if c.find("error") is not None)))
    suite.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))
    suite.set("time", f"{result.duration_s:.3f}")
    return suite


def _check_case(result: GradeResult, check: CheckResult, file: str,
                seconds: float) -> ET.Element:
    points = f"{_num(check.points)}/{_num(check.max_points)} points"
    case = ET.Element("testcase", {"classname": result.exercise,
                                   "name": f"{check.name} [{_num(check.max_points)} points]",
                                   "time": f"{seconds:.3f}"})
    _properties(case, points=_num(check.points), max_points=_num(check.max_points))
    if not check.ran:
        ET.SubElement(case, "skipped", {"message": _text(check.message)})
    elif not check.passed:
        case.set("file", file)
        if (line := check.line or result.line) is not None:
            case.set("line", str(line))
        body = [check.message]
        if check.dump:
            body.extend(dump_table(check.dump))
        failure = ET.SubElement(case, "failure", {"message": _text(check.message),
                                                  "type": "check_failed"})
        failure.text = _text("\n".join(body))
    ET.SubElement(case, "system-out").text = _text(f"{check.name}: {points}: {check.message}")
    return case


def _performance_case(exercise: str, perf: dict) -> ET.Element:
    """On a GPU the timed shapes earn points of their own: a case, so the total adds up."""
    points = f"{_num(perf.get('points', 0))}/{_num(perf.get('max_points', 0))} points"
    case = ET.Element("testcase", {"classname": exercise,
                                   "name": f"performance [{_num(perf.get('max_points', 0))} points]",
                                   "time": "0.000"})
    _properties(case, points=_num(perf.get("points", 0)),
                max_points=_num(perf.get("max_points", 0)))
    if "skipped" in perf:
        ET.SubElement(case, "skipped", {"message": _text(str(perf["skipped"]))})
    said = f": {perf['skipped']}" if "skipped" in perf else ""
    ET.SubElement(case, "system-out").text = _text(f"performance: {points}{said}")
    return case


def _verdict_case(result: GradeResult, file: str, message: str) -> ET.Element:
    attrs = {"classname": result.exercise, "name": result.verdict.value, "time": "0.000",
             "file": file}
    if result.line is not None:
        attrs["line"] = str(result.line)
    case = ET.Element("testcase", attrs)
    error = ET.SubElement(case, "error", {"message": _text(message),
                                          "type": result.verdict.value})
    error.text = _text(message)
    ET.SubElement(case, "system-out").text = _text(
        f"{result.verdict.value}: score {_num(result.score)}/{_num(result.max_score)}: "
        f"{message}")
    return case


def _properties(parent: ET.Element, **values: str) -> None:
    block = ET.SubElement(parent, "properties")
    for name, value in values.items():
        ET.SubElement(block, "property", {"name": name, "value": _text(value)})


def _num(value: float) -> str:
    return f"{value:g}"


def _text(value: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", value)
