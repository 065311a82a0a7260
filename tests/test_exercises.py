"""Exercises are data: discovered from folders, validated, and each has what a student needs."""

import shutil

import pytest

from graders.engine.plan import load_checks_module
from graders.engine.registry import _load_all, all_exercises, references_root
from graders.engine.spec import SpecError, load_spec
from graders.proof.selftest import collect
from graders.shared.vocabulary import Device

EXERCISES = ["causal_block_skip", "log_softmax_xent", "masked_softmax", "online_softmax",
             "safe_softmax"]


def test_the_three_exercises_are_discovered():
    assert sorted(all_exercises()) == EXERCISES


@pytest.mark.parametrize("name", EXERCISES)
def test_each_exercise_folder_is_complete(name):
    spec = all_exercises()[name]
    assert sum(c.points for c in spec.checks) == 100
    load_checks_module(spec)  # a function per check
    assert spec.statement_path.read_text().strip()
    assert spec.skeleton_path("triton") is not None
    for check in spec.checks:
        assert check.description and check.hints.get("default"), check.name
        for device in (Device.CPU, Device.CUDA):
            assert device in check.params


def test_issue_check_names_are_present():
    names = {n: [c.name for c in s.checks] for n, s in all_exercises().items()}
    assert set(names["safe_softmax"]) >= {"random_rows", "poisoned_row", "half_precision_overflow",
                                          "non_power_of_two_cols", "long_rows", "tiny_rows",
                                          "underflow", "fresh_inputs"}
    assert set(names["masked_softmax"]) >= {"random_rows", "scale", "causal", "padding_mask",
                                            "fully_masked_row", "poisoned_row",
                                            "non_power_of_two_cols", "fresh_inputs"}
    assert set(names["online_softmax"]) >= {"combine_identity", "combine_associative",
                                            "combine_commutative", "combine_neg_inf_guard",
                                            "row_stats_match_two_pass", "long_rows", "poisoned_row",
                                            "byte_count_answers"}
    assert set(names["causal_block_skip"]) >= {"causal_rows", "masked_tiles", "fully_masked_rows",
                                               "straddling_tile", "nothing_masked", "long_rows",
                                               "half_precision", "poisoned_row",
                                               "byte_count_answers"}
    assert set(names["log_softmax_xent"]) >= {"overflow_row", "neg_inf_but_one",
                                              "fully_neg_inf_row", "long_rows", "target_edges",
                                              "ignore_index", "all_ignored", "half_inputs",
                                              "traffic_answers"}


def test_long_rows_are_long_enough():
    for spec in all_exercises().values():
        for check in spec.checks:
            if check.name == "long_rows":
                assert min(c for _, c in check.params[Device.CPU]["shapes"]) >= 4096
                assert min(c for _, c in check.params[Device.CUDA]["shapes"]) >= 32768


def test_adding_an_exercise_is_adding_a_folder(tmp_path):
    shutil.copytree(all_exercises()["safe_softmax"].folder, tmp_path / "my_new_exercise")
    found = _load_all(tmp_path)
    assert list(found) == ["my_new_exercise"]
    assert found["my_new_exercise"].entry_points == ("softmax",)


def test_points_must_add_up_to_100(tmp_path):
    folder = tmp_path / "broken"
    shutil.copytree(all_exercises()["safe_softmax"].folder, folder)
    spec = folder / "spec.toml"
    spec.write_text(spec.read_text().replace("points = 20", "points = 21", 1))
    with pytest.raises(SpecError, match="add up to 101"):
        load_spec(folder)


def test_two_timed_shapes_may_not_share_a_label(tmp_path):
    """A shape's figures, speed words and table row are known by its label."""
    folder = tmp_path / "twice"
    shutil.copytree(all_exercises()["safe_softmax"].folder, folder)
    spec = folder / "spec.toml"
    spec.write_text(spec.read_text().replace('x = [32768, 1024, "bfloat16"]',
                                             'x = [32768, 1024, "float32"]', 1))
    with pytest.raises(SpecError, match="another timed shape is labelled '32768×1024 float32'"):
        load_spec(folder)


def test_every_mutant_names_a_known_check_and_each_exercise_has_references():
    cases = collect()
    mutants = [c for c in cases if c.expect != ("passed",)]
    assert {c.exercise.name for c in cases if c.expect == ("passed",)} == set(EXERCISES)
    named = {(c.exercise.name, name) for c in mutants for name in c.expect}
    for required in [("safe_softmax", "poisoned_row"), ("safe_softmax", "non_power_of_two_cols"),
                     ("safe_softmax", "long_rows"), ("safe_softmax", "rejected"),
                     ("masked_softmax", "fully_masked_row"), ("masked_softmax", "padding_mask"),
                     ("masked_softmax", "causal"), ("online_softmax", "combine_neg_inf_guard"),
                     ("causal_block_skip", "fully_masked_rows"),
                     ("causal_block_skip", "straddling_tile"),
                     ("causal_block_skip", "masked_tiles"),
                     ("log_softmax_xent", "overflow_row"), ("log_softmax_xent", "target_edges"),
                     ("log_softmax_xent", "ignore_index"), ("log_softmax_xent", "half_inputs"),
                     ("log_softmax_xent", "rejected")]:
        assert required in named, required
    for case in mutants:
        assert case.why, f"{case.path} should say why it is wrong"
    assert all(c.path.is_relative_to(references_root()) for c in cases)


def _coverage_rows(name):
    """(clause, the check or verdict named first under "checked by", the files of "proved by")
    for each row of exercises/NAME/coverage.md's table."""
    text = (all_exercises()[name].folder / "coverage.md").read_text()
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("clause", "---"):
            continue
        checked_by = cells[1].split("`")[1]
        proved_by = [part for i, part in enumerate(cells[2].split("`")) if i % 2]
        rows.append((cells[0], checked_by, proved_by))
    return rows


@pytest.mark.parametrize("name", EXERCISES)
def test_the_coverage_table_proves_every_check_with_files_that_fail_it(name):
    """Issue 23: every clause of the contract has a check, and a mutant (or a whole wrong
    file) whose '# expect:' line says it fails that check (or gets that verdict); selftest
    grades each one on both devices."""
    spec = all_exercises()[name]
    by_path = {c.path.relative_to(references_root() / name).as_posix(): c for c in collect([name])}
    rows = _coverage_rows(name)
    assert len(rows) >= len(spec.checks)
    verdicts = {"rejected"}
    for clause, checked_by, proved_by in rows:
        assert checked_by in {c.name for c in spec.checks} | verdicts, (clause, checked_by)
        assert proved_by, f"{clause}: no kernel proves it"
        for path in proved_by:
            assert path in by_path, f"{name}/{path} is not a file selftest grades"
            assert checked_by in by_path[path].expect, (path, by_path[path].expect)
    assert {c.name for c in spec.checks} <= {checked_by for _, checked_by, _ in rows}
