"""The selftest's '# expect:' line (a mutant patch's header): parsing, validation and
judging (no grading runs)."""

from pathlib import Path

import pytest

from graders.engine.results import CheckResult, GradeResult
from graders.proof.selftest import Case, collect, judge, read_expectation, validate_expectation
from graders.shared.vocabulary import Verdict

CHECKS = {"random_rows", "poisoned_row", "non_power_of_two_cols", "long_rows", "underflow"}


def _mutant(tmp_path, first_line, name="mutant.patch"):
    """A mutant patch whose header is ``first_line``."""
    path = tmp_path / name
    path.write_text(first_line + "\n--- solution.py\n+++ mutant.py\n@@ -1 +1 @@\n-a\n+b\n")
    return path


def _result(verdict, failed=(), not_run=(), device="cpu"):
    """A GradeResult whose checks in `failed` failed, those in `not_run` never ran."""
    checks = [CheckResult(name, passed=name not in failed, message="", points=0.0,
                          max_points=10.0, ran=name not in not_run)
              for name in sorted(CHECKS)]
    return GradeResult(exercise="safe_softmax", language="triton", device=device,
                       verdict=verdict, score=0.0, checks=checks)


def _case(expect, suffix=".py"):
    # judge() reads only the path's suffix and the expectation, never the exercise
    return Case(exercise=None, path=Path("mutants/m" + suffix), expect=tuple(expect))


# ---- read_expectation --------------------------------------------------------------

def test_single_check_form_still_reads(tmp_path):
    path = _mutant(tmp_path, "# expect: poisoned_row — naive exp without the max subtraction")
    assert read_expectation(path) == (("poisoned_row",), "naive exp without the max subtraction")


def test_several_checks_separated_by_commas(tmp_path):
    path = _mutant(tmp_path, "# expect: long_rows, poisoned_row — why")
    assert read_expectation(path) == (("long_rows", "poisoned_row"), "why")


def test_spacing_around_commas_and_hyphen_separator(tmp_path):
    path = _mutant(tmp_path, "#expect:long_rows ,poisoned_row,  underflow -- why")
    assert read_expectation(path) == (("long_rows", "poisoned_row", "underflow"), "why")


def test_verdict_without_reason_and_hip_comment(tmp_path):
    assert read_expectation(_mutant(tmp_path, "# expect: rejected")) == (("rejected",), "")
    hip = _mutant(tmp_path, "// expect: causal, long_rows — why", name="m.hip.patch")
    assert read_expectation(hip) == (("causal", "long_rows"), "why")


def test_the_why_goes_on_over_comment_lines_until_a_lone_hash(tmp_path):
    path = _mutant(tmp_path, "# expect: long_rows — one program\n# per row\n#\n# a note, not why")
    assert read_expectation(path) == (("long_rows",), "one program per row")


@pytest.mark.parametrize("first_line", [
    '"""no expectation"""',
    "# expect: long_rows, — dangling comma",
    "# expect: , long_rows — leading comma",
    "# expect: long_rows poisoned_row — no comma",
    "# expect: Long_Rows — upper case",
])
def test_malformed_first_lines_are_refused(tmp_path, first_line):
    with pytest.raises(ValueError, match="first line must be"):
        read_expectation(_mutant(tmp_path, first_line))


def test_empty_header_or_file_is_refused(tmp_path):
    with pytest.raises(ValueError, match="first line must be"):
        read_expectation(_mutant(tmp_path, "").with_name("mutant.patch"))
    path = tmp_path / "empty.patch"
    path.write_text("")
    with pytest.raises(ValueError, match="not a unified diff"):
        read_expectation(path)


# ---- validate_expectation ----------------------------------------------------------

def test_every_listed_name_must_be_a_check():
    validate_expectation(Path("m.py"), ("long_rows", "poisoned_row"), CHECKS)
    with pytest.raises(ValueError, match="'long_row'"):
        validate_expectation(Path("m.py"), ("poisoned_row", "long_row"), CHECKS)


def test_a_verdict_stands_alone():
    validate_expectation(Path("m.py"), ("rejected",), CHECKS)
    with pytest.raises(ValueError, match="stand alone"):
        validate_expectation(Path("m.py"), ("rejected", "long_rows"), CHECKS)


def test_a_check_named_twice_is_refused():
    with pytest.raises(ValueError, match="twice"):
        validate_expectation(Path("m.py"), ("long_rows", "long_rows"), CHECKS)


# ---- judge -------------------------------------------------------------------------

def test_single_check_expectation():
    case = _case(["poisoned_row"])
    assert judge(case, _result(Verdict.FAILED, failed={"poisoned_row"}))
    assert judge(case, _result(Verdict.FAILED, failed={"poisoned_row", "underflow"}))  # extras ok
    assert not judge(case, _result(Verdict.FAILED, failed={"underflow"}))
    assert not judge(case, _result(Verdict.PASSED))


def test_two_checks_both_must_fail():
    case = _case(["long_rows", "poisoned_row"])
    assert judge(case, _result(Verdict.FAILED, failed={"long_rows", "poisoned_row"}))
    assert judge(case, _result(Verdict.FAILED,
                               failed={"long_rows", "poisoned_row", "underflow"}))
    assert not judge(case, _result(Verdict.FAILED, failed={"poisoned_row"}))
    assert not judge(case, _result(Verdict.FAILED, failed={"long_rows"}))
    assert not judge(case, _result(Verdict.FAILED, failed={"underflow"}))


def test_a_listed_check_that_never_ran_does_not_count_as_failed():
    case = _case(["long_rows", "poisoned_row"])
    result = _result(Verdict.FAILED, failed={"poisoned_row", "long_rows"}, not_run={"long_rows"})
    assert not judge(case, result)


def test_checks_failing_under_another_verdict_do_not_satisfy():
    case = _case(["long_rows", "poisoned_row"])
    assert not judge(case, _result(Verdict.RUNTIME_ERROR, failed={"long_rows", "poisoned_row"}))


def test_verdict_expectations():
    assert judge(_case(["passed"]), _result(Verdict.PASSED))
    assert not judge(_case(["passed"]), _result(Verdict.FAILED, failed={"long_rows"}))
    assert judge(_case(["rejected"]), _result(Verdict.REJECTED))
    assert not judge(_case(["rejected"]), _result(Verdict.FAILED, failed={"long_rows"}))


def test_hip_on_cpu_must_only_compile_whatever_it_expects():
    case = _case(["long_rows", "poisoned_row"], suffix=".hip")
    assert judge(case, _result(Verdict.COMPILED))
    assert not judge(case, _result(Verdict.FAILED, failed={"long_rows", "poisoned_row"}))
    assert judge(_case(["passed"], suffix=".cpp"), _result(Verdict.COMPILED))
    # on a GPU a HIP mutant is judged like any other
    assert judge(case, _result(Verdict.FAILED, failed={"long_rows", "poisoned_row"}, device="cuda"))


# ---- the course's own mutants ------------------------------------------------------

def test_the_repository_expectations_all_validate():
    cases = collect()  # reads every first line and checks its names; grades nothing
    by_name = {case.path.name: case.expect for case in cases
               if case.exercise.name == "safe_softmax"}
    assert by_name["row_per_program.py"] == ("long_rows",)
    assert by_name["row_per_program_naive_exp.py"] == ("poisoned_row", "underflow", "long_rows")
    assert by_name["row_per_program_tail_zero.py"] == ("non_power_of_two_cols", "long_rows")


# ---- (only): exactly the named checks fail --------------------------------------------

def test_only_after_the_checks_is_read_as_a_last_name(tmp_path):
    path = _mutant(tmp_path, "# expect: long_rows (only) — one block per row")
    assert read_expectation(path) == (("long_rows", "(only)"), "one block per row")
    validate_expectation(path, ("long_rows", "(only)"), CHECKS)


def test_only_demands_that_no_other_check_fails():
    case = _case(["long_rows", "(only)"])
    assert judge(case, _result(Verdict.FAILED, failed={"long_rows"}))
    assert not judge(case, _result(Verdict.FAILED, failed={"long_rows", "poisoned_row"}))
    assert not judge(case, _result(Verdict.FAILED, failed={"poisoned_row"}))
    assert not judge(case, _result(Verdict.RUNTIME_ERROR, failed={"long_rows"}))


def test_only_cannot_follow_a_verdict(tmp_path):
    path = _mutant(tmp_path, "# expect: rejected (only)")
    with pytest.raises(ValueError, match="only"):
        validate_expectation(path, read_expectation(path)[0], CHECKS)
