"""Mutants as patches (graders/proof/mutants.py): applying, refusing, writing, and the course's
own."""

import tomllib

import pytest
from conftest import REPO

from graders.engine.registry import all_exercises
from graders.proof.mutants import (PatchError, apply_patch, get_mutant, list_mutants, make_header,
                                   make_patch, materialise)

REFERENCE = "".join(f"line {i}\n" for i in range(1, 31))
HEADER = "# expect: random_rows — line 10 is wrong\n"


def _edited(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


def test_a_patch_round_trips_and_is_small():
    mutant = _edited(REFERENCE, "line 10\n", "line ten\n")
    patch = make_patch(REFERENCE, mutant, HEADER, "solution.py", "m.py")
    assert patch.startswith(HEADER + "--- solution.py\n+++ m.py\n@@ -7,7 +7,7 @@\n")
    assert sum(line[:1] in "+-" for line in patch.splitlines()[3:]) == 2
    assert apply_patch(REFERENCE, patch) == mutant


def test_a_hunk_follows_its_context_when_the_reference_grows_elsewhere():
    patch = make_patch(REFERENCE, _edited(REFERENCE, "line 20\n", "line twenty\n"), HEADER,
                       "solution.py", "m.py")
    grown = "a new first line\n" + REFERENCE + "a new last line\n"
    assert apply_patch(grown, patch) == _edited(grown, "line 20\n", "line twenty\n")


def test_a_patch_whose_context_changed_names_itself_the_hunk_and_the_line():
    patch = make_patch(REFERENCE, _edited(REFERENCE, "line 20\n", "line twenty\n"), HEADER,
                       "solution.py", "m.py")
    changed = _edited(REFERENCE, "line 19\n", "line nineteen\n")
    with pytest.raises(PatchError) as caught:
        apply_patch(changed, patch, "safe/mutants/m.patch")
    text = str(caught.value)
    assert text.startswith("safe/mutants/m.patch: hunk 1 (line 17 of the reference) does not "
                           "apply")
    assert "'line nineteen' at line 19 where the patch expects 'line 19'" in text


def test_after_the_reference_grew_the_error_still_names_the_line_that_changed():
    # a reference that gained 12 lines above the hunk (as a new tuning helper adds), then
    # a change inside the hunk's context: the message points at the changed line where
    # the hunk now sits, not at whatever the header's old line number holds
    patch = make_patch(REFERENCE, _edited(REFERENCE, "line 20\n", "line twenty\n"), HEADER,
                       "solution.py", "m.py")
    grown = "".join(f"new {i}\n" for i in range(12)) + _edited(REFERENCE, "line 19\n",
                                                                 "line nineteen\n")
    with pytest.raises(PatchError) as caught:
        apply_patch(grown, patch)
    assert "'line nineteen' at line 31 where the patch expects 'line 19'" in str(caught.value)


def test_files_without_a_final_newline_and_insertions_at_either_end():
    reference = "a\nb\nc"
    for mutant in ("a\nb\nc\n", "a\nb\nC", "first\na\nb\nc\nlast"):
        patch = make_patch(reference, mutant, HEADER, "solution.py", "m.py")
        assert apply_patch(reference, patch) == mutant, patch


def test_the_patch_is_refused_when_it_is_the_reference_or_not_a_diff():
    with pytest.raises(PatchError, match="no bug to keep"):
        make_patch(REFERENCE, REFERENCE, HEADER, "solution.py", "m.py")
    with pytest.raises(PatchError, match="not a unified diff"):
        apply_patch(REFERENCE, HEADER + "just words\n", "m.patch")
    with pytest.raises(PatchError, match="cut short"):
        apply_patch(REFERENCE, HEADER + "--- solution.py\n+++ m.py\n@@ -1,3 +1,3 @@\n line 1\n")


def test_a_long_expectation_wraps_and_reads_back_whole():
    why = "the block is capped at 1024 columns " * 6
    header = make_header(f"long_rows, poisoned_row — {why}", ["A note.", "Another."])
    assert all(len(line) <= 96 for line in header.splitlines())
    from graders.proof.mutants import read_expectation

    assert read_expectation(header, "h") == (("long_rows", "poisoned_row"), " ".join(why.split()))


def test_mutant_diff_and_mutant_apply_through_the_cli(tmp_path, monkeypatch):
    """The authors' command writes mutants/NAME.patch beside the reference, keeps the header
    when it regenerates, and refuses an expectation that names no check."""
    refs = tmp_path / "refs"
    (refs / "safe_softmax").mkdir(parents=True)
    reference = (REPO / "reference_solutions/safe_softmax/solution.py").read_text()
    (refs / "safe_softmax" / "solution.py").write_text(reference)
    edited = tmp_path / "edited.py"
    edited.write_text(reference.replace("\n", "\n# an edit\n", 40)[-2000:] + "\n")
    monkeypatch.setenv("GRADERS_REFERENCES", str(refs))

    def cli(*args):
        import os
        import subprocess
        import sys

        return subprocess.run([sys.executable, "-m", "graders", *args], cwd=REPO, text=True,
                              capture_output=True, env={**os.environ}, timeout=60)

    made = cli("mutant-diff", "safe_softmax", str(edited), "--name", "tail_zero",
               "--expect", "non_power_of_two_cols — the tail is loaded as 0.0")
    assert made.returncode == 0, made.stderr
    patch = refs / "safe_softmax" / "mutants" / "tail_zero.patch"
    assert patch.read_text().startswith("# expect: non_power_of_two_cols — the tail is loaded "
                                        "as 0.0\n--- solution.py\n+++ tail_zero.py\n@@ ")
    again = cli("mutant-diff", "safe_softmax", str(edited), "--name", "tail_zero")
    assert again.returncode == 0 and patch.read_text().startswith("# expect: non_power_of_two")
    shown = cli("mutant-apply", "safe_softmax", "tail_zero")
    assert shown.returncode == 0 and shown.stdout == edited.read_text()
    wrong = cli("mutant-diff", "safe_softmax", str(edited), "--name", "other",
                "--expect", "no_such_check — why")
    assert wrong.returncode == 2 and "neither a check nor a verdict" in wrong.stderr
    assert not (refs / "safe_softmax" / "mutants" / "other.patch").exists()
    missing = cli("mutant-apply", "safe_softmax", "nope")
    assert missing.returncode == 2 and "tail_zero.patch" in missing.stderr


# ---- the course's own mutants --------------------------------------------------------

def test_every_course_mutant_is_a_patch_that_applies(tmp_path):
    count = 0
    for exercise in all_exercises():
        folder = tmp_path / exercise
        folder.mkdir()
        for mutant in list_mutants(exercise):
            source = materialise(mutant, folder).read_text()
            assert source != mutant.reference.read_text()
            assert mutant.expectation()[1], f"{mutant.label} should say why it is wrong"
            changed = [line for line in mutant.patch.read_text().splitlines()
                       if line[:1] in "+-" and not line.startswith(("+++ ", "--- "))]
            # the file is the bug: a whole other design belongs in from_scratch/
            assert len(changed) <= MOST_CHANGED_LINES, f"{mutant.label}: {len(changed)} lines"
            count += 1
    assert count == 39 + 9 + 10  # causal_block_skip's 9 (8 of solution.py, 1 of solution.hip),
    # log_softmax_xent's 10


MOST_CHANGED_LINES = 40


def test_kernels_written_from_scratch_are_whole_files_the_selftest_grades():
    """The Triton tutorial's one program per row is not the reference plus a bug: such
    files live whole in from_scratch/, their '# expect:' line at the top."""
    from graders.proof.selftest import collect

    cases = [c for c in collect() if c.path.parent.name == "from_scratch"]
    assert sorted(c.label for c in cases) == [
        "causal_block_skip/from_scratch/reads_whole_row.py",
        "log_softmax_xent/from_scratch/torch_cross_entropy.py",
        "log_softmax_xent/from_scratch/torch_log_of_softmax.py",
        "masked_softmax/from_scratch/boolean_mask.py",
        "masked_softmax/from_scratch/causal_skip_tiles.py",
        "masked_softmax/from_scratch/online_tiles_attention_style.py",
        "masked_softmax/from_scratch/torch_where_mask.py",
        "masked_softmax/from_scratch/unguarded_merge.py",
        "online_softmax/from_scratch/reduce_combine.py",
        "online_softmax/from_scratch/split_row_two_kernels.py",
        "safe_softmax/from_scratch/autotuned_warps.py",
        "safe_softmax/from_scratch/block_ptr_tiles.py",
        "safe_softmax/from_scratch/exp2_after_max.py",
        "safe_softmax/from_scratch/exp2_before_max.py",
        "safe_softmax/from_scratch/heuristics_tiled.py",
        "safe_softmax/from_scratch/numpy_round_trip.py",
        "safe_softmax/from_scratch/raises_on_long_rows.py",
        "safe_softmax/from_scratch/reduce_online_pairs.py",
        "safe_softmax/from_scratch/row_per_program.py",
        "safe_softmax/from_scratch/row_per_program_naive_exp.py",
        "safe_softmax/from_scratch/row_per_program_tail_zero.py",
        "safe_softmax/from_scratch/rows_per_program.py",
        "safe_softmax/from_scratch/stats_then_normalize.py",
        "safe_softmax/from_scratch/torch_softmax_inside.py",
        "safe_softmax/from_scratch/triton_op_library.py",
        "safe_softmax/from_scratch/tutorial_four_stages.py",
        "safe_softmax/from_scratch/tutorial_persistent.py"]
    assert all(c.mutant is None and c.why for c in cases)
    by_name = {c.path.name: c.expect for c in cases}
    # issue 23: the designs students copy get the verdict their design earns
    assert by_name["tutorial_persistent.py"] == ("long_rows", "(only)")
    # issue 41: the tutorial as it is, judged alike on the CPU and the H200
    assert by_name["tutorial_four_stages.py"] == ("poisoned_row", "long_rows", "tiny_rows",
                                                  "(only)")
    assert by_name["raises_on_long_rows.py"] == ("long_rows", "(only)")
    assert by_name["numpy_round_trip.py"] == ("rejected",)
    assert by_name["boolean_mask.py"] == ("additive_bias", "(only)")
    assert by_name["torch_softmax_inside.py"] == ("rejected",)
    # the torch shortcuts of log-softmax and cross-entropy, refused as torch's math
    assert by_name["torch_log_of_softmax.py"] == by_name["torch_cross_entropy.py"] == ("rejected",)
    assert by_name["row_per_program_naive_exp.py"] == ("poisoned_row", "underflow", "long_rows")


def test_a_from_scratch_file_without_an_expect_line_is_refused(tmp_path, monkeypatch):
    import shutil

    from graders.proof.selftest import collect

    refs = tmp_path / "refs"
    shutil.copytree(REPO / "reference_solutions" / "safe_softmax", refs / "safe_softmax")
    (refs / "safe_softmax" / "from_scratch" / "bare.py").write_text("import torch\n")
    monkeypatch.setenv("GRADERS_REFERENCES", str(refs))
    with pytest.raises(ValueError, match=r"bare\.py: the first line must be '# expect:"):
        collect(["safe_softmax"])


def test_only_patches_are_in_mutants_and_the_load_bench_names_its_mutants_by_patch():
    """A full copy left in mutants/ would never be graded, and would drift from its
    reference. The load bench's manifest names mutants by patch; load_mix applies them."""
    for path in sorted((REPO / "reference_solutions").glob("*/mutants/*")):
        assert path.name.endswith(".patch"), \
            f"{path}: a mutant is a .patch (python -m graders mutant-diff)"
    manifest = tomllib.loads((REPO / "graders/bench/mix/manifest.toml").read_text())
    assert not [e["file"] for e in manifest["entry"] if "/mutants/" in e.get("file", "")]
    from graders.bench.load import load_mix

    mutants = {e.label: e.file for e in load_mix() if e.label.endswith(".patch")}
    assert len(mutants) == sum("mutant" in e for e in manifest["entry"]) == 4
    naive = mutants["reference_solutions/safe_softmax/mutants/naive_unsafe_exp.patch"]
    assert naive.suffix == ".py" and "tl.exp(x)" in naive.read_text()


def test_a_patch_that_no_longer_applies_is_a_wrong_case_of_selftest_naming_it(
        tmp_path, monkeypatch, capsys):
    """The selftest grades a mutant from its patch; a patch whose context is gone is a
    failure of the selftest that names the patch and why, and nothing grades it."""
    import shutil

    import graders.proof.selftest as selftest
    from graders.engine.results import GradeResult
    from graders.shared.vocabulary import Device, Verdict

    refs = tmp_path / "refs"
    shutil.copytree(REPO / "reference_solutions" / "safe_softmax", refs / "safe_softmax",
                    ignore=shutil.ignore_patterns("*.hip", "*.hip.patch", "from_scratch"))
    for path in (refs / "safe_softmax" / "mutants").iterdir():
        if path.name != "writes_zeros.patch":
            path.unlink()
    solution = refs / "safe_softmax" / "solution.py"
    patch = (refs / "safe_softmax" / "mutants" / "writes_zeros.patch").read_text()
    context = next(line[1:] for line in patch.splitlines()[3:] if line.startswith("-"))
    solution.write_text(solution.read_text().replace(context, context + "  # changed", 1))
    monkeypatch.setenv("GRADERS_REFERENCES", str(refs))
    graded = []

    def fake_grade(exercise, path, device, **kwargs):  # the reference "passes"; no runner
        graded.append(path.name)
        return GradeResult(exercise.name, "triton", "cpu", Verdict.PASSED, 100.0)

    monkeypatch.setattr(selftest, "grade", fake_grade)
    assert selftest.run_selftest(Device.CPU, jobs=1, only=["safe_softmax"], sandbox=False) == 1
    out = capsys.readouterr().out
    assert graded == ["solution.py"]
    assert "WRONG safe_softmax/mutants/writes_zeros.patch" in out
    assert "safe_softmax/mutants/writes_zeros.patch: hunk 1 (line " in out
    assert "does not apply" in out and "# changed" in out
    assert out.rstrip().splitlines()[-1].startswith("1 of 2 as expected")


def test_a_patch_must_name_the_reference_its_file_name_says(tmp_path):
    """A HIP diff saved as NAME.patch would be graded as Triton: refused, saying why."""
    folder = tmp_path / "ex" / "mutants"
    folder.mkdir(parents=True)
    (tmp_path / "ex" / "solution.py").write_text(REFERENCE)
    (folder / "m.patch").write_text(make_patch(REFERENCE, REFERENCE + "x\n", HEADER,
                                               "solution.hip", "m.hip"))
    with pytest.raises(PatchError, match="patches solution.hip, but a mutant named m.patch "
                                         "patches solution.py"):
        materialise(get_mutant("ex", "m", root=tmp_path), tmp_path)


def test_the_guides_recipe_carries_a_mutant_onto_a_changed_reference(tmp_path, monkeypatch):
    """docs/authoring.md, 'When the reference changes': the patch stops applying; the old
    mutant merged onto the new reference and re-diffed gives the bug on the new reference,
    the header kept."""
    import os
    import shutil
    import subprocess
    import sys

    refs = tmp_path / "refs"
    shutil.copytree(REPO / "reference_solutions" / "safe_softmax", refs / "safe_softmax")
    monkeypatch.setenv("GRADERS_REFERENCES", str(refs))
    solution = refs / "safe_softmax" / "solution.py"
    old = tmp_path / "old.py"
    shutil.copy(solution, old)
    mutant = get_mutant("safe_softmax", "writes_zeros")
    header = mutant.header()
    context = next(line[1:] for line in mutant.patch.read_text().splitlines()[3:]
                   if line.startswith(" ") and line.strip())
    solution.write_text(solution.read_text().replace(context, context + "  # moved on", 1))
    with pytest.raises(PatchError, match="does not apply"):
        materialise(mutant, tmp_path)

    def cli(*args):
        proc = subprocess.run([sys.executable, "-m", "graders", *args], cwd=REPO, text=True,
                              capture_output=True, env={**os.environ}, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc

    cli("mutant-apply", "safe_softmax", "writes_zeros", "--reference", str(old),
        "--out", str(tmp_path / "old_mutant.py"))
    shutil.copy(solution, tmp_path / "new_mutant.py")
    merged = subprocess.run(["git", "merge-file", str(tmp_path / "new_mutant.py"), str(old),
                             str(tmp_path / "old_mutant.py")], capture_output=True, text=True)
    assert merged.returncode == 0, merged.stderr  # no conflict: the bug is not the change
    cli("mutant-diff", "safe_softmax", str(tmp_path / "new_mutant.py"), "--name", "writes_zeros")
    assert mutant.header() == header
    source = materialise(mutant, tmp_path).read_text()
    assert "# moved on" in source and source == (tmp_path / "new_mutant.py").read_text()
