"""Checks of the log-softmax and cross-entropy exercise (trusted: runs in the checker).

The references are float64, from the exact values the kernels were given:
log softmax(x)_i = (x_i - m) - log(s), a row that is entirely -inf giving -inf everywhere;
the loss of row r is -log softmax(x)[r, t_r] (+inf where that is -inf), 0.0 for a row whose
target is ignore_index; the mean is over the rows that are not ignored, 0.0 over none.
"""

import numpy as np

from graders.engine.casekit import CheckFailed

NEG_INF = float("-inf")
IGNORE = -100  # cross_entropy's default ignore_index


def log_softmax64(logits):
    logits = np.asarray(logits, dtype=np.float64)
    m = logits.max(axis=-1, keepdims=True)
    empty = np.isneginf(m)
    shift = np.where(empty, 0.0, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (logits - shift) - np.log(np.exp(logits - shift).sum(axis=-1, keepdims=True))
    return np.where(empty, NEG_INF, out)


def xent64(logits, target, ignore_index=IGNORE):
    """Each row's loss (0.0 where ignored), and which rows count."""
    target = np.asarray(target).reshape(-1)
    keep = target != ignore_index
    rows = np.nonzero(keep)[0]
    loss = np.zeros(len(target))
    loss[rows] = -log_softmax64(logits)[rows, target[rows]]
    return loss, keep


def mean64(loss, keep):
    return np.array(loss[keep].sum() / max(int(keep.sum()), 1))


# -- calls ---------------------------------------------------------------------------------

def _log_softmax_call(ctx, x, notes=None):
    y = yield ctx.call("log_softmax", x)
    logits = x.to_f64()
    ctx.expect_rows(y, log_softmax64(logits), dtype=x.dtype, logits=logits,
                    probabilities=False, notes=notes)


def _xent_calls(ctx, x, target, ignore_index=None, notes=None):
    """cross_entropy with reduction='none' (every row's loss) and then the mean, both
    float32 and judged at float32's tolerance whatever x's dtype."""
    kwargs = {} if ignore_index is None else {"ignore_index": ignore_index}
    ignored = IGNORE if ignore_index is None else ignore_index
    logits, t = x.to_f64(), target.data
    loss, keep = xent64(logits, t, ignored)
    notes = notes or {}

    def describe(i):
        said = "ignored" if not keep[i] else f"target {int(t[i])} of {logits.shape[1]} columns"
        return {"label": f"row {i} ({said}{', ' + notes[i] if i in notes else ''})",
                "target": int(t[i]), "row_max_input": float(logits[i].max())}

    rows = yield ctx.call("cross_entropy", x, target, reduction="none", **kwargs)
    ctx.expect_values(rows, loss, what="loss", describe=describe)
    mean = yield ctx.call("cross_entropy", x, target, **kwargs)
    kept = int(keep.sum())
    try:
        ctx.expect_values(mean, mean64(loss, keep), what="mean loss", describe=lambda i: {
            "label": f"reduction='mean' ({kept} of {len(keep)} rows not ignored)",
            "rows_kept": kept})
    except CheckFailed as failed:  # every row right, their mean wrong: its own advice
        if failed.failure.symptom in ("value", "precision"):
            failed.failure.symptom = "mean"
        raise


def _targets(ctx, rows, cols):
    return ctx.rng.integers(0, cols, size=rows)


def _int64(ctx, values):
    return ctx.array(np.asarray(values, dtype=np.float64), "int64")


def _each(ctx):
    for rows, cols in ctx.params["shapes"]:
        for dtype in ctx.params.get("dtypes", ["float32"]):
            yield rows, cols, dtype


# -- log_softmax -----------------------------------------------------------------------------

def overflow_row(ctx):
    for rows, cols, dtype in _each(ctx):
        if dtype == "float16":  # every logit past ln(65504) ≈ 11.1, where float16's exp is inf
            values = ctx.rng.uniform(10.0, 15.0, (rows, cols))
            notes = {r: "(float16 logits between 10 and 15)" for r in range(rows)}
        else:
            values = ctx.rng.standard_normal((rows, cols)) * 2.0
            notes = {}
            for row, big in ((0, 100.0), (rows // 2, 1000.0), (rows - 1, 100.0)):
                col = int(ctx.rng.integers(cols))
                values[row, col] = big
                notes[row] = f"after {big:g} at column {col}"
            values[1] += 100.0  # a whole row near 100: every unshifted exp overflows
            notes[1] = "(logits near 100.0)"
        yield from _log_softmax_call(ctx, ctx.array(values, dtype), notes)


def neg_inf_but_one(ctx):
    for rows, cols, dtype in _each(ctx):
        values = ctx.rng.standard_normal((rows, cols)) * 3.0
        notes = {}
        for r in range(0, rows, 2):  # every other row; the rows between stay ordinary
            kept = (0, cols - 1, int(ctx.rng.integers(cols * 3 // 4, cols)))[(r // 2) % 3]
            one = values[r, kept]
            values[r] = NEG_INF
            values[r, kept] = one
            notes[r] = f"(-inf but column {kept})"
        yield from _log_softmax_call(ctx, ctx.array(values, dtype), notes)


def fully_neg_inf_row(ctx):
    for rows, cols, dtype in _each(ctx):
        values = ctx.rng.standard_normal((rows, cols)) * 3.0
        empty = sorted({0, rows // 2, rows - 1})
        values[empty] = NEG_INF
        yield from _log_softmax_call(ctx, ctx.array(values, dtype),
                                     {r: "(entirely -inf)" for r in empty})


def long_rows(ctx):
    for rows, cols, dtype in _each(ctx):
        values = ctx.rng.standard_normal((rows, cols)) * 3.0
        for r in range(rows):  # the row max in the far end, past any fixed block
            values[r, int(ctx.rng.integers(cols * 3 // 4, cols))] = 12.0
        yield from _log_softmax_call(ctx, ctx.array(values, dtype))


# -- cross_entropy ---------------------------------------------------------------------------

def target_edges(ctx):
    for rows, cols in ctx.params["shapes"]:
        x = ctx.randn((rows, cols), scale=3.0)
        target = np.where(np.arange(rows) % 2 == 0, 0, cols - 1)
        notes = {r: "the first column" if target[r] == 0 else "the last column"
                 for r in range(rows)}
        yield from _xent_calls(ctx, x, _int64(ctx, target), notes=notes)


def ignore_index(ctx):
    for rows, cols in ctx.params["shapes"]:
        # about a quarter of the rows ignored, one of them entirely -inf
        values = ctx.rng.standard_normal((rows, cols)) * 3.0
        target = _targets(ctx, rows, cols)
        target[ctx.rng.random(rows) < 0.25] = IGNORE
        target[1] = IGNORE
        values[1] = NEG_INF
        notes = {1: "entirely -inf"}
        yield from _xent_calls(ctx, ctx.array(values), _int64(ctx, target), notes=notes)
        # ignore_index=-1 passed; an entirely -inf row that is not ignored: loss +inf
        values = ctx.rng.standard_normal((rows, cols)) * 3.0
        target = _targets(ctx, rows, cols)
        target[::3] = -1
        values[rows - 1] = NEG_INF
        target[rows - 1] = int(ctx.rng.integers(cols))
        notes = {rows - 1: "entirely -inf, not ignored: its loss is +inf"}
        yield from _xent_calls(ctx, ctx.array(values), _int64(ctx, target), ignore_index=-1,
                               notes=notes)


def all_ignored(ctx):
    for rows, cols in ctx.params["shapes"]:
        yield from _xent_calls(ctx, ctx.randn((rows, cols), scale=3.0),
                               _int64(ctx, np.full(rows, IGNORE)))
        # ignore_index may be a real column: every target 7, ignore_index=7
        yield from _xent_calls(ctx, ctx.randn((rows, cols), scale=3.0),
                               _int64(ctx, np.full(rows, min(7, cols - 1))),
                               ignore_index=min(7, cols - 1))


def half_inputs(ctx):
    for rows, cols, dtype in _each(ctx):
        yield from _log_softmax_call(ctx, ctx.randn((rows, cols), dtype, scale=3.0))
        # flat logits: many terms near 1, a sum in the hundreds, where a half-precision
        # running sum drops digits (float16's step is 0.5 from 512 on)
        x = ctx.randn((rows, cols), dtype, scale=0.5)
        yield from _xent_calls(ctx, x, _int64(ctx, _targets(ctx, rows, cols)))


# -- the traffic question ----------------------------------------------------------------------

def _byte_counts(spec, rows, cols, dtype):
    """(bytes_composed, bytes_fused, bytes_xent) for R×C logits of ``dtype``."""
    traversal = spec["element_bytes"][dtype] * rows * cols
    return (spec["traversals_composed"] * traversal, spec["traversals_fused"] * traversal,
            traversal + (spec["target_bytes"] + spec["loss_bytes"]) * rows)


KEYS = ("bytes_composed", "bytes_fused", "bytes_xent")


def traffic_answers(ctx):
    spec = ctx.data["answers"]
    answers = ctx.attributes.get("ANSWERS")
    if not isinstance(answers, dict):
        ctx.fail("type", "ANSWERS must be a dict with " + ", ".join(KEYS))
    mine = tuple(ctx.submission_params[name] for name in ("rows", "cols", "dtype"))
    shape = f"R = {mine[0]}, C = {mine[1]} {mine[2]}"
    expected = _byte_counts(spec, *mine)
    given = tuple(answers.get(key) for key in KEYS)
    if given != expected:
        declared = [ctx.param_specs[name] for name in ("rows", "cols", "dtype")]
        others = [(r, c, d) for r in declared[0].choices for c in declared[1].choices
                  for d in declared[2].choices if (r, c, d) != mine
                  and _byte_counts(spec, r, c, d) == given]
        if others:
            r, c, d = others[0]
            ctx.fail("value", f"{', '.join(KEYS)} are the counts for another shape "
                              f"(R = {r}, C = {c} {d}), not for your own, {shape} (the one "
                              "your exercise page shows; offline, give it to `grade --params`)")
    wrong = [f"{key} = {value!r}" for key, value, want in zip(KEYS, given, expected)
             if isinstance(value, bool) or value != want]
    if wrong:
        ctx.fail("value", f"{'; '.join(wrong)}: not the bytes moved for your {shape}")


def performance_reference(shape, inputs, rows):
    """Expected rows of a timed call: log-softmax rows, or a row's loss as a 1×1 row."""
    if shape.fn == "log_softmax":
        return log_softmax64(inputs["x"])
    loss, _ = xent64(inputs["x"], inputs["target"][:, 0].astype(np.int64))
    return loss.reshape(-1, 1)
