"""Timed shapes whose output is not a softmax row of x's dtype (no GPU needed): class-index
inputs, a float32 loss per row judged as plain values, an entry point's own traffic table for
the speed words, and a shape that only reads believed up to its own fraction of the copy
(log_softmax_xent's cross-entropy). And the judge: a -inf the reference holds is not wrong.
"""

import dataclasses
import shutil

import numpy as np
import pytest
import torch

from graders.engine.judge import compare_rows
from graders.engine.performance import (PerformanceRejected, PerformanceRun, ShapeFigures,
                                        speed_diagnosis)
from graders.engine.plan import load_checks_module
from graders.engine.registry import get_exercise
from graders.engine.spec import SpecError, load_spec
from graders.shared import perfinputs
from graders.shared.arrays import HostArray, from_f64


def test_class_indices_are_made_alike_by_torch_and_numpy():
    recipe = perfinputs.InputRecipe("target", "class_index", 300, 50257, "int64")
    assert recipe.shape == (300,) and recipe.nbytes == 300 * 8
    out = torch.empty(recipe.shape, dtype=perfinputs.torch_dtype(torch, "int64"))
    perfinputs.fill(torch, out, recipe, seed=12345)
    rows = np.array([0, 7, 299])
    host = perfinputs.host_rows(recipe, 12345, rows)
    assert host.dtype == "int64" and host.data.shape == (3, 1)  # a value a row, as a row
    assert host.data[:, 0].tolist() == out[rows].tolist()
    assert 0 <= out.min() and out.max() < 50257 and len(set(out.tolist())) > 250


def test_the_loss_shapes_read_as_the_issue_asks():
    perf = get_exercise("log_softmax_xent").performance
    assert perf.probabilities is False
    log_softmax, *losses = perf.shapes
    assert log_softmax.output_dtype == "float32" and log_softmax.believable is None
    assert log_softmax.bytes_moved == 2 * 4 * 4096 * 4096  # x read once, y written once
    for shape in losses:  # the logits read once, the int64 targets, a float32 loss a row
        size = {"float32": 4, "bfloat16": 2}[shape.dtype]
        rows, cols = shape.rows, shape.cols
        assert shape.bytes_moved == size * rows * cols + 8 * rows + 4 * rows
        assert shape.output_dtype == "float32" and shape.believable == 1.15
        assert shape.inputs[1].kind == "class_index" and shape.kwargs == {"reduction": "none"}
    assert [d[0] for d in perf.designs["cross_entropy"]] == [1, 2, 4]


def test_a_spec_refuses_class_indices_first_and_a_loose_output(tmp_path):
    folder = tmp_path / "xent"
    shutil.copytree(get_exercise("log_softmax_xent").folder, folder)
    spec = folder / "spec.toml"
    text = spec.read_text()
    spec.write_text(text.replace('output = "float32", bytes = 536920064',
                                 'output = "int64", bytes = 536920064'))
    with pytest.raises(SpecError, match="output should be one of"):
        load_spec(folder)
    spec.write_text(text.replace('inputs = { x = [4096, 32768, "float32"], target = [4096, 32768, '
                                 '"int64", "class_index"] }',
                                 'inputs = { target = [4096, 32768, "int64", "class_index"], '
                                 'x = [4096, 32768, "float32"] }'))
    with pytest.raises(SpecError, match="not class indices"):
        load_spec(folder)
    spec.write_text(text.replace("believable = 1.15 },\n  { fn", "believable = 3.0 },\n  { fn"))
    with pytest.raises(SpecError, match="believable"):
        load_spec(folder)


class _Rows:
    """The perf_rows reply: each picked output row computed from the seed recipe, in float32,
    and the picked input rows as they were made."""

    def __init__(self, shape, seed, checks, wrong=0.0):
        self.shape, self.seed, self.checks, self.wrong = shape, seed, checks, wrong

    def request(self, header, during=None, budget_s=None):
        arrays = []
        for c, row in header["outputs"]:
            inputs = {r.name: perfinputs.host_rows(r, perfinputs.call_seed(self.seed, c, j),
                                                   np.array([row])).to_f64()
                      for j, r in enumerate(self.shape.inputs)}
            value = self.checks.performance_reference(self.shape, inputs, np.array([row]))
            arrays.append(from_f64(value.reshape(-1)[0] + self.wrong, "float32"))  # a 0-d row
        for c, j, row in header["inputs"]:
            recipe = self.shape.inputs[j]
            made = perfinputs.host_rows(recipe, perfinputs.call_seed(self.seed, c, j), [row])
            arrays.append(HostArray(made.data[0].copy(), made.dtype))
        return type("Reply", (), {"arrays": arrays, "header": {}})()


@pytest.mark.parametrize("wrong, believed", [(0.0, True), (0.5, False)])
def test_a_timed_loss_per_row_is_judged_in_float32_as_values(wrong, believed):
    exercise = get_exercise("log_softmax_xent")
    shape = dataclasses.replace(exercise.performance.shapes[1], inputs=tuple(
        dataclasses.replace(r, rows=64, cols=1000) for r in exercise.performance.shapes[1].inputs))
    checks = load_checks_module(exercise)
    run = PerformanceRun(exercise.performance, exercise.tolerances, checks,
                         _Rows(shape, 99, checks, wrong), np.random.default_rng(0), None)
    if believed:
        run._check_rows(shape, 99, reps=5, pool=2, during="in a test")
    else:
        with pytest.raises(PerformanceRejected, match="output of timed call"):
            run._check_rows(shape, 99, reps=5, pool=2, during="in a test")


def test_a_shape_that_only_reads_is_believed_up_to_its_own_fraction():
    exercise = get_exercise("log_softmax_xent")
    run = PerformanceRun(exercise.performance, exercise.tolerances, None, None,
                         np.random.default_rng(0), None)
    log_softmax, loss, _ = exercise.performance.shapes

    def timed(fraction):
        def once(shape):
            return ShapeFigures(shape.label, shape.fn, shape.rows, shape.cols, shape.dtype,
                                shape.bytes_moved, 1.0, 1.0, 1.0, fraction, 0.01, 0.01, 10)
        return once

    run._time_once = timed(1.10)
    assert run.shape(loss).fraction == pytest.approx(1.10)  # under its 1.15
    with pytest.raises(PerformanceRejected, match="impossible"):
        run.shape(log_softmax)  # a read and a write, as the copy: 1.05 holds


def test_the_speed_words_speak_in_the_entry_points_own_traffic():
    designs = get_exercise("log_softmax_xent").performance.designs["cross_entropy"]
    rows, cols = 16384, 32768
    least = 2 * rows * cols + 12 * rows

    def words(fraction):
        figures = ShapeFigures("l", "cross_entropy", rows, cols, "bfloat16", least, 1.0, 1.0,
                               1.0, fraction, 0.01, 0.01, 10)
        return speed_diagnosis(figures, designs)["text"]

    assert "1.0 traversals of x" in words(0.99) or words(0.99).startswith("at the copy ceiling")
    assert "2.0 traversals of x" in words(0.5) and "log_softmax written out" in words(0.5)
    assert "log(softmax(x)) composed" in words(0.25)
    assert "more than any design" in words(0.15)


def test_a_minus_inf_the_reference_holds_is_not_the_row_blamed():
    expected = np.array([[0.0, -np.inf, -np.inf], [-1.0, -2.0, -3.0]])
    got = from_f64(np.array([[0.0, -np.inf, -np.inf], [-1.0, -2.5, -3.0]]), "float32")
    failure = compare_rows(got, expected, get_exercise("log_softmax_xent").tolerances["float32"],
                           dtype="float32", probabilities=False)
    assert failure.row == 1 and failure.symptom == "value" and "column 1" in failure.text
    got = from_f64(np.array([[0.0, -np.inf, -np.inf], [-1.0, -np.inf, -3.0]]), "float32")
    failure = compare_rows(got, expected, get_exercise("log_softmax_xent").tolerances["float32"],
                           dtype="float32", probabilities=False)
    assert failure.row == 1 and failure.symptom == "inf"
    assert failure.text == "row 1 holds -inf at column 1"
