"""`python -m graders grade --format text|json|junit|github` (issue 15, item 1)."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

import pytest
from conftest import REPO, mutant_file, run_cli
from lxml import etree

from graders.engine.results import CheckResult, GradeResult
from graders.formats.github import annotation_path, command
from graders.formats.junit import render_junit
from graders.shared.vocabulary import Verdict

PASSING = "reference_solutions/safe_softmax/solution.py"
FAILING = str(mutant_file("safe_softmax", "naive_unsafe_exp"))  # poisoned_row, underflow
SYNTAX_ERROR = "tests/fixtures/syntax_error.py"  # compile_error on line 4

# The subset of the common Jenkins/Ant JUnit schema that the graders emit, written here so
# the report is held to it: a <testsuites> of <testsuite>s, each with <properties>,
# <testcase>s and an optional <system-out>; a testcase has optional <properties> and at most
# one of <skipped>, <error>, <failure>. Counts are integers, times decimals.
JUNIT_XSD = b"""<?xml version="1.0" encoding="UTF-8"?>
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" elementFormDefault="qualified">
  <xs:simpleType name="count"><xs:restriction base="xs:nonNegativeInteger"/></xs:simpleType>
  <xs:simpleType name="seconds"><xs:restriction base="xs:decimal">
    <xs:minInclusive value="0"/></xs:restriction></xs:simpleType>
  <xs:simpleType name="nonEmpty"><xs:restriction base="xs:string">
    <xs:minLength value="1"/></xs:restriction></xs:simpleType>

  <xs:complexType name="properties"><xs:sequence>
    <xs:element name="property" maxOccurs="unbounded"><xs:complexType>
      <xs:attribute name="name" type="nonEmpty" use="required"/>
      <xs:attribute name="value" type="xs:string" use="required"/>
    </xs:complexType></xs:element>
  </xs:sequence></xs:complexType>

  <xs:complexType name="outcome"><xs:simpleContent><xs:extension base="xs:string">
    <xs:attribute name="message" type="xs:string"/>
    <xs:attribute name="type" type="xs:string"/>
  </xs:extension></xs:simpleContent></xs:complexType>

  <xs:complexType name="testcase"><xs:sequence>
    <xs:element name="properties" type="properties" minOccurs="0"/>
    <xs:choice minOccurs="0">
      <xs:element name="skipped" type="outcome"/>
      <xs:element name="error" type="outcome"/>
      <xs:element name="failure" type="outcome"/>
    </xs:choice>
    <xs:element name="system-out" type="xs:string" minOccurs="0"/>
    <xs:element name="system-err" type="xs:string" minOccurs="0"/>
  </xs:sequence>
    <xs:attribute name="name" type="nonEmpty" use="required"/>
    <xs:attribute name="classname" type="nonEmpty" use="required"/>
    <xs:attribute name="time" type="seconds"/>
    <xs:attribute name="file" type="xs:string"/>
    <xs:attribute name="line" type="xs:positiveInteger"/>
  </xs:complexType>

  <xs:complexType name="testsuite"><xs:sequence>
    <xs:element name="properties" type="properties" minOccurs="0"/>
    <xs:element name="testcase" type="testcase" minOccurs="0" maxOccurs="unbounded"/>
    <xs:element name="system-out" type="xs:string" minOccurs="0"/>
    <xs:element name="system-err" type="xs:string" minOccurs="0"/>
  </xs:sequence>
    <xs:attribute name="name" type="nonEmpty" use="required"/>
    <xs:attribute name="tests" type="count" use="required"/>
    <xs:attribute name="failures" type="count" use="required"/>
    <xs:attribute name="errors" type="count" use="required"/>
    <xs:attribute name="skipped" type="count"/>
    <xs:attribute name="time" type="seconds"/>
    <xs:attribute name="timestamp" type="xs:dateTime"/>
    <xs:attribute name="hostname" type="xs:string"/>
  </xs:complexType>

  <xs:element name="testsuites"><xs:complexType><xs:sequence>
    <xs:element name="testsuite" type="testsuite" minOccurs="0" maxOccurs="unbounded"/>
  </xs:sequence>
    <xs:attribute name="name" type="xs:string"/>
    <xs:attribute name="tests" type="count"/>
    <xs:attribute name="failures" type="count"/>
    <xs:attribute name="errors" type="count"/>
    <xs:attribute name="skipped" type="count"/>
    <xs:attribute name="time" type="seconds"/>
  </xs:complexType></xs:element>
</xs:schema>
"""
SCHEMA = etree.XMLSchema(etree.fromstring(JUNIT_XSD))


def junit_of(stdout: str) -> etree._Element:
    """Parse and validate; a schema violation fails the test with the schema's reason."""
    doc = etree.fromstring(stdout.encode())
    if not SCHEMA.validate(doc):
        pytest.fail(f"JUnit report does not match the schema: {SCHEMA.error_log}\n{stdout}")
    (suite,) = doc.findall("testsuite")
    cases = suite.findall("testcase")
    # the counts a CI system shows must be what the cases say
    for key, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
        assert int(suite.get(key)) == sum(c.find(tag) is not None for c in cases), key
    assert int(suite.get("tests")) == len(cases)
    return suite


def grade(file: str, fmt: str) -> subprocess.CompletedProcess:
    return run_cli("grade", "safe_softmax", file, "--device", "cpu", "--format", fmt)


def outcome(case) -> str:
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return tag
    return "passed"


def check_name(case) -> str:
    """A check's case is named with the points it is worth, "poisoned_row [20 points]" (the
    same name whatever it earned, so a reporter's history follows it): the name without."""
    return case.get("name").split(" [")[0]


def shown_points(case) -> tuple[str, str]:
    """The points where a CI system's report shows them: what the check is worth in the
    case's name, what it earned in its <system-out> (the common reporters do not show
    <properties>)."""
    named = re.fullmatch(r"(\w+) \[([0-9.]+) points\]", case.get("name"))
    assert named, case.get("name")
    name, max_points = named.groups()
    earned = re.match(rf"{name}: ([0-9.]+)/{re.escape(max_points)} points: ",
                      case.find("system-out").text)
    assert earned, case.find("system-out").text
    return earned.group(1), max_points


def test_junit_for_a_passing_reference():
    run = grade(PASSING, "junit")
    assert run.returncode == 0, run.stderr
    suite = junit_of(run.stdout)
    assert suite.get("name") == "safe_softmax"
    cases = suite.findall("testcase")
    assert len(cases) == 8 and {outcome(c) for c in cases} == {"passed"}
    for case in cases:
        assert case.get("classname") == "safe_softmax"
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert props["points"] == props["max_points"] != "0"
        assert shown_points(case) == (props["points"], props["max_points"])
        assert case.find("system-out").text.endswith(" points: passed")
        assert case.get("file") is None  # only a failed case points at the file
    assert sum(float(shown_points(c)[0]) for c in cases) == 100
    suite_props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert (suite_props["verdict"], suite_props["score"]) == ("passed", "100")


def test_junit_for_a_failing_mutant_names_the_failed_checks():
    run = grade(FAILING, "junit")
    assert run.returncode == 1, run.stderr
    suite = junit_of(run.stdout)
    failed = {check_name(c): c for c in suite.findall("testcase") if outcome(c) == "failure"}
    assert set(failed) == {"poisoned_row", "underflow"}
    poisoned = failed["poisoned_row"]
    assert poisoned.get("name") == "poisoned_row [20 points]"
    assert failed["underflow"].get("name") == "underflow [10 points]"
    assert "subtract the row max" in poisoned.find("failure").get("message")
    assert "got" in poisoned.find("failure").text  # the worst row's table rides along
    out = poisoned.find("system-out").text
    assert out.startswith("poisoned_row: 0/20 points: row 1 is all NaN"), out
    # each failed check points at the student's file; the grader knows no line for these
    for case in failed.values():
        assert (case.get("file"), case.get("line")) == (FAILING, None)
    assert suite.get("errors") == "0"


def test_junit_for_a_syntax_error_fails_the_suite_on_line_4():
    run = grade(SYNTAX_ERROR, "junit")
    assert run.returncode == 1, run.stderr
    suite = junit_of(run.stdout)
    cases = suite.findall("testcase")
    assert {outcome(c) for c in cases[:-1]} == {"skipped"}  # no check ran
    error_case = cases[-1]
    assert (error_case.get("name"), error_case.get("line")) == ("compile_error", "4")
    assert "IndentationError" in error_case.find("error").get("message")
    assert error_case.find("system-out").text.startswith(
        "compile_error: score 0/100: IndentationError")
    assert suite.get("errors") == "1"
    assert all(shown_points(c)[0] == "0" for c in cases[:-1])  # skipped: no points


def test_github_marks_the_syntax_error_on_its_file_and_line():
    run = grade(SYNTAX_ERROR, "github")
    assert run.returncode == 1, run.stderr
    first = run.stdout.splitlines()[0]
    assert first.startswith(
        "::error file=tests/fixtures/syntax_error.py,line=4,title=safe_softmax%3A "
        "compile_error::IndentationError"), first
    assert ("::notice file=tests/fixtures/syntax_error.py,title=safe_softmax%3A compile_error"
            "::verdict compile_error, score 0/100, 0 of 8 checks passed") in run.stdout


def test_github_gives_each_failed_check_an_error():
    run = grade(FAILING, "github")
    assert run.returncode == 1, run.stderr
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 2
    assert errors[0].startswith(f"::error file={FAILING},title=safe_softmax%3A poisoned_row "
                                "0/20::row 1 is all NaN")
    assert "title=safe_softmax%3A underflow 0/10::" in errors[1]


def test_github_marks_a_raised_check_on_the_line_that_raised_and_adds_a_summary_row(
        monkeypatch, tmp_path):
    from graders.formats.github import append_step_summary, render_github

    raised = CheckResult("long_rows", False, "softmax(2×100003 float32) raised RuntimeError: "
                         "too wide (line 40 of your file)", 0.0, 15.0, line=40)
    ok = CheckResult("random_rows", True, "passed", 85.0, 85.0)
    result = GradeResult("safe_softmax", "triton", "cpu", Verdict.FAILED, 85.0, [ok, raised])
    (error,) = [line for line in render_github(result, "mine.py").splitlines()
                if line.startswith("::error")]
    assert error.startswith("::error file=mine.py,line=40,title=safe_softmax%3A long_rows 0/15::")
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    append_step_summary(result)
    append_step_summary(result)  # a second grading adds a row under the same header
    row = "| safe_softmax | failed | 85/100 | long_rows (0/15) |\n"
    assert summary.read_text() == ("| exercise | verdict | score | failed checks |\n"
                                   "|---|---|---|---|\n" + row + row)


def test_github_escapes_data_and_properties():
    assert command("error", "50% done\r\nnext", file="a:b,c.py", line=3, title=None) == \
        "::error file=a%3Ab%2Cc.py,line=3::50%25 done%0D%0Anext"


def test_github_paths_are_from_the_repository_root(monkeypatch, tmp_path):
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    assert annotation_path(str(tmp_path / "src" / "mine.py")) == "src/mine.py"
    assert annotation_path("./mine.py") == "mine.py"
    assert annotation_path("/elsewhere/mine.py") == "/elsewhere/mine.py"


def test_github_quotes_the_students_output_with_commands_off():
    """What the program printed is in the report; a printed `::error` must stay text."""
    from graders.formats.github import render_github

    result = GradeResult("safe_softmax", "triton", "cpu", Verdict.PASSED, 100.0,
                         output="::error::forged\n")
    out = render_github(result, "mine.py").splitlines()
    stop = next(i for i, line in enumerate(out) if line.startswith("::stop-commands::"))
    token = out[stop].split("::")[2]
    resume = out.index(f"::{token}::")
    assert len(token) >= 32 and stop < out.index("  | ::error::forged") < resume


def test_junit_escapes_markup_and_drops_what_xml_cannot_hold():
    nasty = 'a <b> & "c"\x00\x1b[31m'
    result = GradeResult("safe_softmax", "triton", "cpu", Verdict.RUNTIME_ERROR, 0.0,
                         checks=[CheckResult("random_rows", False, nasty, 0.0, 15.0)],
                         message=nasty, line=7, output="printed\x07\n")
    suite = junit_of(render_junit(result, "mine.py"))
    failure = suite.find("testcase/failure")
    assert failure.get("message") == 'a <b> & "c"\\x00\\x1b[31m'
    assert suite.find("testcase/system-out").text == \
        'random_rows: 0/15 points: a <b> & "c"\\x00\\x1b[31m'
    # the message names no line: the failed check takes the run's
    assert (suite.find("testcase").get("file"), suite.find("testcase").get("line")) == \
        ("mine.py", "7")
    error_case = suite.findall("testcase")[-1]
    assert (error_case.get("name"), error_case.get("line")) == ("runtime_error", "7")
    assert suite.find("system-out").text == "printed\\x07\n"


def test_junit_a_failed_check_names_the_file_and_its_line():
    """A check whose call raised knows the student's line: its case carries that line; one
    without takes the run's line, and without either only the file is given."""
    raised = CheckResult("long_rows", False, "softmax(2×100003 float32) raised RuntimeError: "
                         "too wide (line 40 of your file)", 0.0, 15.0, line=40)
    wrong = CheckResult("poisoned_row", False, "row 1 is all NaN", 0.0, 20.0)
    ok = CheckResult("random_rows", True, "passed", 15.0, 15.0)

    def cases(line):
        result = GradeResult("safe_softmax", "triton", "cpu", Verdict.FAILED, 15.0,
                             [ok, raised, wrong], line=line)
        return {check_name(c): c for c in junit_of(render_junit(result, "src/mine.py"))
                .findall("testcase")}

    without = cases(None)
    assert [(c.get("file"), c.get("line")) for c in without.values()] == \
        [(None, None), ("src/mine.py", "40"), ("src/mine.py", None)]
    with_run_line = cases(12)
    assert with_run_line["long_rows"].get("line") == "40"  # its own line comes first
    assert with_run_line["poisoned_row"].get("line") == "12"
    assert with_run_line["random_rows"].get("line") is None
    assert shown_points(without["long_rows"]) == ("0", "15")
    assert without["long_rows"].find("system-out").text.endswith("(line 40 of your file)")


def test_junit_the_performance_case_shows_its_points_too():
    """On a GPU the timed shapes are a case of their own, named with their points."""
    ok = CheckResult("random_rows", True, "passed", 100.0, 100.0)

    def perf_case(performance):
        result = GradeResult("safe_softmax", "triton", "cuda", Verdict.PASSED, 137.5, [ok],
                             performance=performance, max_score=200.0)
        return junit_of(render_junit(result, "mine.py")).findall("testcase")[-1]

    timed = perf_case({"fraction_of_copy": 0.375, "points": 37.5, "max_points": 100})
    assert (timed.get("name"), outcome(timed)) == ("performance [100 points]", "passed")
    assert timed.find("system-out").text == "performance: 37.5/100 points"
    skipped = perf_case({"skipped": "a check failed", "points": 0, "max_points": 100})
    assert (skipped.get("name"), outcome(skipped)) == ("performance [100 points]", "skipped")
    assert skipped.find("system-out").text == "performance: 0/100 points: a check failed"


def test_json_is_the_same_as_format_json_and_they_cannot_disagree():
    a = run_cli("grade", "safe_softmax", SYNTAX_ERROR, "--device", "cpu", "--json")
    b = grade(SYNTAX_ERROR, "json")
    assert a.returncode == b.returncode == 1

    def stable(text):
        out = json.loads(text)
        for key in ("duration_s", "phases"):
            out.pop(key)
        return out

    assert stable(a.stdout) == stable(b.stdout)
    assert stable(a.stdout)["line"] == 4 and "slot" in stable(a.stdout)
    both = run_cli("grade", "safe_softmax", SYNTAX_ERROR, "--json", "--format", "junit")
    assert both.returncode == 2 and "--json" in both.stderr


@pytest.mark.parametrize("fmt, starts", [("text", "grading syntax_error.py"),
                                         ("junit", "<?xml"), ("github", "::error ")])
def test_progress_lines_only_for_text_on_a_terminal(fmt, starts):
    """On a terminal the text report is preceded by progress; the machine formats never."""
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "graders", "grade", "safe_softmax",
                             SYNTAX_ERROR, "--device", "cpu", "--format", fmt], cwd=REPO,
                            stdout=child, stderr=subprocess.DEVNULL)
    os.close(child)  # read while it writes: a full terminal buffer would block it
    chunks = []
    try:
        while chunk := os.read(main, 65536):
            chunks.append(chunk)
    except OSError:  # EIO: the program closed its end, all is read
        pass
    finally:
        os.close(main)
    assert proc.wait(timeout=120) == 1
    out = b"".join(chunks).decode()
    assert out.startswith(starts), out[:200]


def test_only_a_run_that_went_wrong_beyond_its_checks_gets_an_error_entry_of_its_own():
    ok = CheckResult("random_rows", True, "ok", 10.0, 10.0)
    bad = CheckResult("poisoned_row", False, "NaN in row 3", 0.0, 10.0)

    def result(verdict, checks, message=""):
        return GradeResult("safe_softmax", "triton", "cpu", verdict, 0.0, checks, message)

    assert result(Verdict.PASSED, [ok]).run_error() is None
    assert result(Verdict.FAILED, [ok, bad]).run_error() is None  # its failed check says it
    assert result(Verdict.FAILED, [ok], "the answers were not checked").run_error() == \
        "the answers were not checked"
    assert result(Verdict.TIMEOUT, [ok]).run_error() == "the run ended: timeout"
    junit = render_junit(result(Verdict.TIMEOUT, [ok]), "solution.py")
    assert 'type="timeout"' in junit and "the run ended: timeout" in junit
