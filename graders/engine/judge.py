"""Judging outputs against the float64 reference, and saying what is wrong.

A comparison is elementwise, |got - expected| <= atol + rtol * |expected| with
the dtype's tolerance, NaN never equal to anything; for probability rows the
values must also lie in [0, 1]. When it fails, the judge picks the worst row
(NaN first, then inf, then the largest error relative to tolerance), names the
symptom (``nan``, ``inf``, ``zeros``, ``sum``, ``value``, ``precision``, ``shape``,
``dtype``) so a check's spec can attach the course's advice, and dumps a few values of
that row: input, expected, got. ``precision`` is a wrong value that is nonetheless close:
every error within ``PRECISION_FACTOR`` tolerances (and under 1 %): the arithmetic lost
digits somewhere (logits scaled before the max is subtracted, a half-precision sum),
which is a different fix from a missing max subtraction or a wrong formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from graders.engine.spec import Tolerance
from graders.shared.arrays import HostArray

DUMP_COLUMNS = 8
# "close but outside the tolerance": every error under this many tolerances, and under 1 %
PRECISION_FACTOR = 100.0
PRECISION_CEILING = 1e-2


@dataclass
class Failure:
    symptom: str
    text: str  # "row 3 is all NaN"
    row: int | None = None
    dump: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    line: int | None = None  # the student's line, where the failure is a call that raised


def json_float(value: float) -> float | str:
    """JSON has no NaN or inf: write them as strings the UI can highlight."""
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return float(f"{value:.9g}")


def fmt(value: float) -> str:
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.7g}"


def check_shape_dtype(got: HostArray, shape: tuple[int, ...], dtype: str, what: str) -> Failure | None:
    if got.shape != tuple(shape):
        return Failure("shape", f"{what} has shape {list(got.shape)}, expected {list(shape)}")
    if got.dtype != dtype:
        return Failure("dtype", f"{what} is {got.dtype}, expected {dtype}")
    return None


def _only_precision(g: np.ndarray, e: np.ndarray, outside: np.ndarray, tol: Tolerance) -> bool:
    """Whether every element outside the tolerance is still close (finite, and within
    PRECISION_FACTOR tolerances and PRECISION_CEILING relative error)."""
    g, e = g[outside], e[outside]
    if not (np.isfinite(g).all() and np.isfinite(e).all()):
        return False
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.abs(g - e) / np.maximum(np.abs(e), 1e-300)
    bound = min(PRECISION_FACTOR * tol.rtol, PRECISION_CEILING)
    return bool((rel < bound).all())


def _all_within(g: np.ndarray, e: np.ndarray, tol: Tolerance) -> bool:
    """Whether every element is within tolerance: ``_error_ratio(g, e, tol) <= 1``
    everywhere, in fewer passes over the arrays (a passing output is the common case, and
    the judging was a tenth of the checker's CPU on the H200). Exact, not a shortcut: where
    ``|g - e| <= atol + rtol |e|`` (the bound finite) the ratio's division rounds to at
    most 1, and an element this test cannot clear (a NaN, an infinity on either side) goes
    to ``_error_ratio``."""
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.subtract(g, e)
        np.abs(diff, out=diff)
        bound = np.abs(e)
        bound *= tol.rtol
        bound += tol.atol
        # an infinite expectation bounds nothing here: a finite answer to it differs by
        # infinity, which must not pass as "within infinity"
        np.minimum(bound, np.finfo(np.float64).max, out=bound)
        return bool((diff <= bound).all())


def _error_ratio(g: np.ndarray, e: np.ndarray, tol: Tolerance) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        ratio = np.abs(g - e) / (tol.atol + tol.rtol * np.abs(e))
    ratio = np.where(g == e, 0.0, ratio)  # equal infinities match
    return np.where(np.isnan(ratio), np.inf, ratio)


def compare_rows(got: HostArray, expected: np.ndarray, tol: Tolerance, *, dtype: str,
                 logits: np.ndarray | None = None, probabilities: bool = True,
                 what: str = "output") -> Failure | None:
    """Row-wise outputs (a softmax): every element within tolerance, else the worst row."""
    bad = check_shape_dtype(got, expected.shape, dtype, what)
    if bad:
        return bad
    g = got.to_f64()
    if _all_within(g, expected, tol) and (not probabilities or bool(
            ((g >= -tol.atol) & (g <= 1.0 + tol.rtol)).all())):
        return None
    ratio = _error_ratio(g, expected, tol)
    outside = ratio > 1.0
    if probabilities:
        with np.errstate(invalid="ignore"):
            outside |= (g < -tol.atol) | (g > 1.0 + tol.rtol)
    if not outside.any():
        return None

    nan_per_row = np.isnan(g).sum(axis=1)
    # an infinity the reference holds too (a log-probability of -inf) is not wrong
    wrong_inf = np.isinf(g) & outside
    inf_per_row = wrong_inf.sum(axis=1)
    row_error = np.where(outside, ratio, 0.0).max(axis=1)
    order = np.lexsort((-row_error, -inf_per_row, -nan_per_row, ~outside.any(axis=1)))
    r = int(order[0])
    gr, er = g[r], expected[r]
    cols = gr.shape[0]
    if nan_per_row[r]:
        first = int(np.argmax(np.isnan(gr)))
        text = (f"row {r} is all NaN" if nan_per_row[r] == cols
                else f"row {r} has {nan_per_row[r]} NaN values (first at column {first})")
        symptom, focus = "nan", first
    elif inf_per_row[r]:
        focus = int(np.argmax(wrong_inf[r]))
        symptom, text = "inf", f"row {r} holds {fmt(gr[focus])} at column {focus}"
    elif probabilities and not gr.any() and er.any():
        symptom, text, focus = "zeros", f"row {r} is all zeros (it should sum to 1)", int(np.argmax(er))
    elif probabilities and not er.any() and gr.any():
        focus = int(np.argmax(np.abs(gr)))
        symptom, text = "masked", f"row {r} is fully masked and should be all zeros, got sum {fmt(gr.sum())}"
    else:
        focus = int(np.argmax(np.where(outside[r], ratio[r], -1.0)))
        s, es = gr.sum(), er.sum()
        if probabilities and abs(s - es) > max(1e-3, 10 * tol.rtol):
            symptom, text = "sum", f"row {r} sums to {fmt(s)}, not {fmt(es)}"
        else:
            rel = abs(gr[focus] - er[focus]) / max(abs(er[focus]), 1e-300)
            symptom = "precision" if _only_precision(g, expected, outside, tol) else "value"
            measured = (f": close, but over {dtype}'s tolerance of {tol.rtol:g}"
                        if symptom == "precision" else f", {dtype} tolerance {tol.rtol:g}")
            text = (f"row {r}, column {focus}: got {fmt(gr[focus])}, expected {fmt(er[focus])} "
                    f"(relative error {rel:.2g}{measured})")
    return Failure(symptom, text, row=r, dump=_row_dump(r, focus, gr, er, logits, got.shape, dtype))


def _row_dump(r: int, focus: int, gr: np.ndarray, er: np.ndarray, logits: np.ndarray | None,
              shape: tuple[int, ...], dtype: str) -> dict[str, Any]:
    cols = gr.shape[0]
    picks = {0, 1, cols - 1, focus, max(focus - 1, 0), min(focus + 1, cols - 1)}
    if logits is not None:
        lr = logits[r]
        finite = np.where(np.isfinite(lr), lr, -np.inf)
        picks.add(int(np.argmax(finite)))
    columns = sorted(c for c in picks if 0 <= c < cols)[:DUMP_COLUMNS]
    dump = {"row": r, "shape": list(shape), "dtype": dtype, "columns": columns,
            "expected": [json_float(er[c]) for c in columns],
            "got": [json_float(gr[c]) for c in columns]}
    if logits is not None:
        dump["input"] = [json_float(logits[r][c]) for c in columns]
    return dump


def compare_values(got: HostArray, expected: np.ndarray, tol: Tolerance, *, dtype: str, what: str,
                   describe: Callable[[int], dict[str, Any]] | None = None) -> Failure | None:
    """Elementwise outputs (a vector of statistics): the worst element, described by the case."""
    bad = check_shape_dtype(got, expected.shape, dtype, what)
    if bad:
        return bad
    g = got.to_f64().reshape(-1)
    e = expected.reshape(-1)
    if _all_within(g, e, tol):
        return None
    ratio = _error_ratio(g, e, tol)
    if not (ratio > 1.0).any():
        return None
    nan = np.isnan(g)
    i = int(np.argmax(nan)) if nan.any() else int(np.argmax(ratio))
    if nan[i]:
        symptom = "nan"
    elif np.isinf(g[i]) and not np.isinf(e[i]):
        symptom = "inf"
    elif _only_precision(g, e, ratio > 1.0, tol):
        symptom = "precision"
    else:
        symptom = "value"
    context = describe(i) if describe else {}
    label = context.pop("label", f"element {i}")
    text = f"{what} at {label} is {fmt(g[i])}, expected {fmt(e[i])}"
    dump = {"index": i, **{k: json_float(v) if isinstance(v, (int, float)) else v
                          for k, v in context.items()},
            "expected": json_float(e[i]), "got": json_float(g[i])}
    return Failure(symptom, text, row=i, dump=dump)
