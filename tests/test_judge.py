import json

import numpy as np

from graders.engine.casekit import combine64, row_stats64, softmax64
from graders.engine.judge import compare_rows, compare_values
from graders.engine.spec import Tolerance
from graders.shared.arrays import from_f64

F32 = Tolerance(rtol=1e-5, atol=1e-10)
RNG = np.random.default_rng(1)


def _logits(rows=6, cols=1000):
    return from_f64(RNG.standard_normal((rows, cols)) * 3, "float32").to_f64()


def test_correct_float32_output_passes():
    z = _logits()
    assert compare_rows(from_f64(softmax64(z), "float32"), softmax64(z), F32, dtype="float32") is None


def test_all_zeros_never_passes():
    # KernelBench's softmax task passed zeros at atol 1e-2; a probability row never is zeros
    z = _logits(cols=4096)
    failure = compare_rows(from_f64(np.zeros_like(z), "float32"), softmax64(z), F32, dtype="float32")
    assert failure is not None and failure.symptom == "zeros"


def test_float32_computed_in_float16_fails():
    z = _logits(cols=256)
    half = softmax64(z).astype(np.float16).astype(np.float64)
    failure = compare_rows(from_f64(half, "float32"), softmax64(z), F32, dtype="float32")
    assert failure is not None and failure.symptom in ("value", "sum")


def test_close_values_are_named_precision_and_far_ones_value():
    z = _logits(cols=300) - 1000.0
    exact = softmax64(z)
    # exp2 of x·log2 e rounded in float32, before the max is subtracted: ~5e-5 relative
    close = exact * (1 + 5e-5 * RNG.standard_normal(exact.shape))
    failure = compare_rows(from_f64(close, "float32"), exact, F32, dtype="float32", logits=z)
    assert failure.symptom == "precision"
    assert "close, but over float32's tolerance of 1e-05" in failure.text
    far = exact.copy()
    far[2] = np.roll(far[2], 1)  # the right values in the wrong columns
    failure = compare_rows(from_f64(far, "float32"), exact, F32, dtype="float32", logits=z)
    assert failure.symptom == "value" and failure.row == 2
    m, s = row_stats64(z)
    failure = compare_values(from_f64(s * (1 + 3e-5), "float32"), s, F32, dtype="float32",
                             what="s")
    assert failure.symptom == "precision"


def test_nan_row_is_named_with_a_json_safe_dump():
    z = _logits()
    got = softmax64(z)
    got[3] = np.nan
    failure = compare_rows(from_f64(got, "float32"), softmax64(z), F32, dtype="float32", logits=z)
    assert failure.symptom == "nan" and failure.row == 3
    assert failure.text == "row 3 is all NaN"
    json.dumps(failure.dump, allow_nan=False)
    assert failure.dump["got"][0] == "nan" and len(failure.dump["input"]) == len(failure.dump["columns"])


def test_worst_row_prefers_nan_over_small_errors():
    z = _logits()
    got = softmax64(z) * 1.01
    got[4, 7] = np.nan
    failure = compare_rows(from_f64(got, "float32"), softmax64(z), F32, dtype="float32")
    assert failure.row == 4 and "1 NaN values (first at column 7)" in failure.text


def test_fully_masked_row_must_be_zeros():
    z = _logits()
    z[2] = -np.inf
    got = softmax64(z)
    got[2] = 1.0 / z.shape[1]  # the "uniform" choice, which the statement rules out
    failure = compare_rows(from_f64(got, "float32"), softmax64(z), F32, dtype="float32")
    assert failure.symptom == "masked" and failure.row == 2


def test_wrong_dtype_and_shape_are_named():
    z = _logits()
    assert compare_rows(from_f64(softmax64(z), "float16"), softmax64(z), F32,
                        dtype="float32").symptom == "dtype"
    assert compare_rows(from_f64(softmax64(z)[:, :-1], "float32"), softmax64(z), F32,
                        dtype="float32").symptom == "shape"


def test_values_comparison_treats_equal_infinities_as_equal():
    m = np.array([-np.inf, 1.0])
    assert compare_values(from_f64(m, "float32"), m, F32, dtype="float32", what="m") is None
    nan = compare_values(from_f64(np.array([np.nan, 1.0]), "float32"), m, F32, dtype="float32", what="m")
    assert nan.symptom == "nan" and nan.row == 0


def test_references_handle_empty_partials():
    m, s = combine64(np.array([-np.inf, 2.0]), np.array([0.0, 3.0]),
                     np.array([-np.inf, -np.inf]), np.array([0.0, 0.0]))
    assert m[0] == -np.inf and s[0] == 0.0 and m[1] == 2.0 and s[1] == 3.0
    m, s = row_stats64(np.array([[-np.inf, -np.inf], [0.0, 0.0]]))
    assert (m[0], s[0], m[1], s[1]) == (-np.inf, 0.0, 0.0, 2.0)
    assert not softmax64(np.full((1, 4), -np.inf)).any()


def test_the_quick_pass_clears_only_what_the_full_ratio_clears():
    """compare_rows and compare_values answer "within tolerance" from a quicker test first
    (judge._all_within); it may send an output on to the full ratio, but must never clear
    one the ratio would fail: NaN, infinities on either side, zeros, huge values."""
    from graders.engine.judge import _all_within, _error_ratio

    rng = np.random.default_rng(7)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e308, -1e308, 1e-320, 1.0])
    for tol in (Tolerance(rtol=1e-5, atol=1e-6), Tolerance(rtol=1e-3, atol=0.0)):
        for _ in range(3000):
            e = rng.choice(specials, 4) if rng.random() < 0.5 else rng.standard_normal(4)
            with np.errstate(over="ignore", invalid="ignore"):
                g = e * (1 + rng.choice([0.0, tol.rtol * 0.5, tol.rtol * 2, 1.0], 4))
            g = np.where(rng.random(4) < 0.2, rng.choice(specials, 4), g)
            if _all_within(g, e, tol):
                assert not (_error_ratio(g, e, tol) > 1.0).any(), (g, e)
    # and the quick pass does clear what passes (else it saves nothing)
    e = rng.standard_normal(1000)
    assert _all_within(e * (1 + 1e-7), e, Tolerance(rtol=1e-5, atol=1e-6))
    assert not _all_within(np.full(3, 5.0), np.array([5.0, 5.0, -np.inf]),
                           Tolerance(rtol=1e-5, atol=1e-6))
