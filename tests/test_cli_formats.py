"""`python -m graders grade --format text|json|junit|github` (issue 15, item 1)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest
from lxml import etree

from conftest import REPO, mutant_file, run_cli
from graders.formats.github import annotation_path, command
from graders.formats.junit import render_junit
from graders.results import CheckResult, GradeResult
from graders.vocabulary import Verdict

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
    suite_props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert (suite_props["verdict"], suite_props["score"]) == ("passed", "100")


def test_junit_for_a_failing_mutant_names_the_failed_checks():
    run = grade(FAILING, "junit")
    assert run.returncode == 1, run.stderr
    suite = junit_of(run.stdout)
    failed = {c.get("name"): c.find("failure") for c in suite.findall("testcase")
              if outcome(c) == "failure"}
    assert set(failed) == {"poisoned_row", "underflow"}
    assert "subtract the row max" in failed["poisoned_row"].get("message")
    assert "got" in failed["poisoned_row"].text  # the worst row's table rides along
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
    assert suite.get("errors") == "1"


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
    error_case = suite.findall("testcase")[-1]
    assert (error_case.get("name"), error_case.get("line")) == ("runtime_error", "7")
    assert suite.find("system-out").text == "printed\\x07\n"


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
