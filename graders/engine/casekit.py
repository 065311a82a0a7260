"""What an exercise's ``checks.py`` is written with.

A check is a function ``def name(ctx):`` in the exercise folder, usually a
generator. It
makes inputs with ``ctx`` (from the run's secret seed), yields ``ctx.call(...)``
to have the runner call the submission, gets the outputs back from the
``yield``, and judges them with ``ctx.expect_*`` against a float64 reference it
computed itself. The first failed expectation ends the check. Every call gets
fresh values, so a cached or stale output cannot pass twice.

The float64 references shared by row-wise exercises live here too; an exercise
may equally define its own in its ``checks.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from graders.engine.judge import Failure, compare_rows, compare_values
from graders.engine.params import ParamSpec
from graders.engine.spec import CheckSpec, Tolerance
from graders.shared.arrays import HostArray, from_f64


@dataclass
class Call:
    fn: str
    args: tuple
    kwargs: dict
    label: str


class CheckFailed(Exception):
    def __init__(self, failure: Failure):
        super().__init__(failure.text)
        self.failure = failure


@dataclass
class CaseContext:
    check: CheckSpec
    params: dict[str, Any]
    tolerances: dict[str, Tolerance]
    rng: np.random.Generator
    device: str
    attributes: dict[str, Any] = field(default_factory=dict)  # module values the runner reported
    data: dict[str, Any] = field(default_factory=dict)  # the spec's exercise-level tables
    # this submission's own values of the spec's [params] (graders/engine/params.py), and their
    # declarations (every choice, the default): a check may tell "right for another
    # submission's values" from plain wrong
    submission_params: dict[str, Any] = field(default_factory=dict)
    param_specs: dict[str, ParamSpec] = field(default_factory=dict)
    last_call: Call | None = field(default=None)

    # -- inputs -------------------------------------------------------------------------
    def array(self, values: np.ndarray, dtype: str = "float32") -> HostArray:
        return from_f64(values, dtype)

    def randn(self, shape: tuple[int, ...] | list[int], dtype: str = "float32",
              scale: float = 1.0, shift: float = 0.0) -> HostArray:
        return from_f64(self.rng.standard_normal(tuple(shape)) * scale + shift, dtype)

    def call(self, fn: str, *args: Any, **kwargs: Any) -> Call:
        def show(v: Any) -> str:
            if isinstance(v, HostArray):
                return "×".join(map(str, v.shape)) + f" {v.dtype}"
            return repr(v)

        parts = [show(a) for a in args] + [f"{k}={show(v)}" for k, v in kwargs.items()]
        call = Call(fn, args, kwargs, f"{fn}({', '.join(parts)})")
        self.last_call = call
        return call

    # -- judging ------------------------------------------------------------------------
    def tolerance(self, dtype: str) -> Tolerance:
        return self.tolerances[dtype]

    def fail(self, symptom: str, text: str, dump: dict[str, Any] | None = None) -> None:
        raise CheckFailed(Failure(symptom, text, dump=dump))

    def expect_rows(self, got: HostArray, expected: np.ndarray, *, dtype: str,
                    logits: np.ndarray | None = None, probabilities: bool = True,
                    notes: dict[int, str] | None = None, what: str = "output") -> None:
        failure = compare_rows(got, expected, self.tolerance(dtype), dtype=dtype, logits=logits,
                               probabilities=probabilities, what=what)
        if failure is not None:
            if notes and failure.row in notes:
                failure.notes.append(notes[failure.row])
            raise CheckFailed(failure)

    def expect_values(self, got: HostArray, expected: np.ndarray, *, dtype: str = "float32",
                      what: str = "output", describe: Callable[[int], dict[str, Any]] | None = None,
                      tolerance: Tolerance | None = None) -> None:
        failure = compare_values(got, expected, tolerance or self.tolerance(dtype), dtype=dtype,
                                 what=what, describe=describe)
        if failure is not None:
            raise CheckFailed(failure)


# -- float64 references for row-wise exercises ---------------------------------------------

def softmax64(logits: np.ndarray) -> np.ndarray:
    """Row softmax in float64; a row that is entirely -inf gives zeros."""
    logits = np.asarray(logits, dtype=np.float64)
    m = logits.max(axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(logits - m)
    s = e.sum(axis=-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def row_stats64(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row max m and s = Σ exp(x - m) in float64; an all -inf row gives (-inf, 0)."""
    logits = np.asarray(logits, dtype=np.float64)
    m = logits.max(axis=-1)
    safe = np.where(np.isneginf(m), 0.0, m)
    s = np.exp(logits - safe[..., None]).sum(axis=-1)
    return m, s


def combine64(m_a: np.ndarray, s_a: np.ndarray, m_b: np.ndarray, s_b: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """The guarded merge of two (max, sum) partials, in float64."""
    m = np.maximum(m_a, m_b)
    safe = np.where(np.isneginf(m), 0.0, m)
    with np.errstate(invalid="ignore"):
        s = s_a * np.exp(m_a - safe) + s_b * np.exp(m_b - safe)
    return m, np.where(np.isneginf(m), 0.0, s)
