"""Checks of the online softmax exercise (trusted: runs in the checker).

The combine checks call the student's elementwise ``combine`` on (m, s) partials
made from real rows; ``row_stats`` and ``online_softmax`` are judged against the
two-pass float64 statistics and softmax.
"""

import numpy as np

from graders.engine.casekit import combine64, row_stats64, softmax64

NEG_INF = float("-inf")


def _partials(ctx, size, empty_fraction=0.0):
    """(m, s) partials of random chunks: m ~ 5·randn, s in [1, 64]; some may be empty."""
    m = ctx.rng.standard_normal(size) * 5.0
    s = ctx.rng.uniform(1.0, 64.0, size)
    if empty_fraction:
        empty = ctx.rng.random(size) < empty_fraction
        m[empty], s[empty] = NEG_INF, 0.0
    m32, s32 = ctx.array(m), ctx.array(s)
    return m32, s32


def _pair(p):
    return p[0].to_f64(), p[1].to_f64()


def _describe(a, b):
    (ma, sa), (mb, sb) = _pair(a), _pair(b)

    def describe(i):
        return {"label": f"element {i}, combine((m_a={ma[i]:g}, s_a={sa[i]:g}), "
                         f"(m_b={mb[i]:g}, s_b={sb[i]:g}))",
                "m_a": ma[i], "s_a": sa[i], "m_b": mb[i], "s_b": sb[i]}

    return describe


def _combine(ctx, a, b):
    """Call combine(a, b), judge it against the float64 merge, return the result partial."""
    got = yield ctx.call("combine", a[0], a[1], b[0], b[1])
    if not isinstance(got, tuple) or len(got) != 2:
        ctx.fail("type", "combine must return a pair (m, s) of tensors")
    m, s = combine64(*_pair(a), *_pair(b))
    describe = _describe(a, b)
    ctx.expect_values(got[0], m, what="m", describe=describe)
    ctx.expect_values(got[1], s, what="s", describe=describe)
    return got


def combine_identity(ctx):
    size = ctx.params["size"]
    p = _partials(ctx, size)
    empty = (ctx.array(np.full(size, NEG_INF)), ctx.array(np.zeros(size)))
    yield from _combine(ctx, p, empty)
    yield from _combine(ctx, empty, _partials(ctx, size))


def combine_associative(ctx):
    size = ctx.params["size"]
    a, b, c = (_partials(ctx, size) for _ in range(3))
    ab = yield from _combine(ctx, a, b)
    left = yield from _combine(ctx, ab, c)
    bc = yield from _combine(ctx, b, c)
    right = yield from _combine(ctx, a, bc)
    m, s = combine64(*combine64(*_pair(a), *_pair(b)), *_pair(c))
    for grouping, got in (("combine(combine(a, b), c)", left), ("combine(a, combine(b, c))", right)):
        ctx.expect_values(got[0], m, what=f"m of {grouping}")
        ctx.expect_values(got[1], s, what=f"s of {grouping}")


def combine_commutative(ctx):
    size = ctx.params["size"]
    a, b = _partials(ctx, size), _partials(ctx, size)
    ab = yield from _combine(ctx, a, b)
    ba = yield from _combine(ctx, b, a)
    tight = ctx.tolerance("float32")
    ctx.expect_values(ba[0], ab[0].to_f64(), what="m of combine(b, a) against combine(a, b)",
                      tolerance=tight)
    ctx.expect_values(ba[1], ab[1].to_f64(), what="s of combine(b, a) against combine(a, b)",
                      tolerance=tight)


def combine_neg_inf_guard(ctx):
    size = ctx.params["size"]
    empty = (ctx.array(np.full(size, NEG_INF)), ctx.array(np.zeros(size)))
    yield from _combine(ctx, empty, empty)
    # mixed: about a third of each side empty, so some elements are empty on both sides
    yield from _combine(ctx, _partials(ctx, size, 0.4), _partials(ctx, size, 0.4))


def _row_stats_call(ctx, x, notes=None):
    got = yield ctx.call("row_stats", x)
    if not isinstance(got, tuple) or len(got) != 2:
        ctx.fail("type", "row_stats must return a pair (m, s) of tensors")
    logits = x.to_f64()
    m, s = row_stats64(logits)

    def describe(i):
        label = f"row {i}" + (f" {notes[i]}" if notes and i in notes else "")
        return {"label": label, "row_max_input": float(logits[i].max())}

    ctx.expect_values(got[0], m, what="m", describe=describe)
    ctx.expect_values(got[1], s, what="s", describe=describe)


def _softmax_call(ctx, x, notes=None):
    y = yield ctx.call("online_softmax", x)
    logits = x.to_f64()
    ctx.expect_rows(y, softmax64(logits), dtype="float32", logits=logits, notes=notes)


def row_stats_match_two_pass(ctx):
    for rows, cols in ctx.params["shapes"]:
        values = ctx.rng.standard_normal((rows, cols)) * 3.0
        # an increasing ramp makes every element a new max: the rescale is exercised
        values[0] = np.linspace(-5.0, 5.0, cols)
        yield from _row_stats_call(ctx, ctx.array(values))


def long_rows(ctx):
    for rows, cols in ctx.params["shapes"]:
        values = ctx.rng.standard_normal((rows, cols)) * 3.0
        for r in range(rows):
            values[r, int(ctx.rng.integers(cols * 3 // 4, cols))] = 12.0
        yield from _softmax_call(ctx, ctx.array(values))


def poisoned_row(ctx):
    for rows, cols in ctx.params["shapes"]:
        values = ctx.rng.standard_normal((rows, cols)) * 2.0
        notes = {}
        for row, big in ((0, 100.0), (rows // 2, 1000.0)):
            col = int(ctx.rng.integers(cols))
            values[row, col] = big
            notes[row] = f"after {big:g} at column {col}"
        values[1] += 100.0
        notes[1] = "after logits near 100.0"
        x = ctx.array(values)
        yield from _row_stats_call(ctx, x, notes)
        yield from _softmax_call(ctx, ctx.array(values), notes)


def tiny_shapes(ctx):
    for rows, cols in ctx.params["shapes"]:
        values = ctx.rng.standard_normal((rows, cols)) * 3.0
        yield from _row_stats_call(ctx, ctx.array(values))
        yield from _softmax_call(ctx, ctx.array(values))


def _byte_counts(spec, rows, cols, dtype):
    """(bytes_3pass, bytes_1pass) for an R×C tensor of ``dtype``: traversals × its bytes."""
    tensor = spec["element_bytes"][dtype] * rows * cols
    return spec["traversals_3pass"] * tensor, spec["traversals_1pass"] * tensor


def _shape(rows, cols, dtype):
    return f"R = {rows}, C = {cols} {dtype}"


def _shapes_counted(ctx, spec, counts):
    """Every shape the spec's [params] allow whose byte counts are ``counts``, the example
    (the defaults) first: a student who answers for one of them copied, or took the
    statement's example, rather than counted for their own."""
    declared = [ctx.param_specs[name] for name in ("rows", "cols", "dtype")]
    example = tuple(p.default for p in declared)
    shapes = [example] + [(r, c, d) for r in declared[0].choices for c in declared[1].choices
                          for d in declared[2].choices if (r, c, d) != example]
    return [s for s in shapes if _byte_counts(spec, *s) == counts]


def _named(shapes):
    """One shape to name, and a word that there are others of the same size in bytes."""
    return _shape(*shapes[0]) + (", or another of the same size" if len(shapes) > 1 else "")


def byte_count_answers(ctx):
    spec = ctx.data["answers"]
    answers = ctx.attributes.get("ANSWERS")
    if not isinstance(answers, dict):
        ctx.fail("type", "ANSWERS must be a dict with bytes_3pass, bytes_1pass and fp16_overflow_logit")
    # the submission's own tensor (the server's per-student values; the defaults offline)
    mine = (ctx.submission_params["rows"], ctx.submission_params["cols"],
            ctx.submission_params["dtype"])
    expected = _byte_counts(spec, *mine)
    given = tuple(answers.get(key) for key in ("bytes_3pass", "bytes_1pass"))
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in given)
    wrong = []
    if numbers and given != expected and (other := _shapes_counted(ctx, spec, given)):
        ctx.fail("value", f"bytes_3pass = {given[0]!r} and bytes_1pass = {given[1]!r} are the "
                          f"counts for a different shape ({_named(other)}), not for your "
                          f"shape, {_shape(*mine)} (the one your exercise page shows; offline, "
                          "give it to `grade --params`)")
    for key, want in zip(("bytes_3pass", "bytes_1pass"), expected):
        value = answers.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value != want:
            wrong.append(f"{key} = {value!r} is not the bytes moved for your {_shape(*mine)}")
    logit = answers.get("fp16_overflow_logit")
    if not isinstance(logit, (int, float)) or abs(logit - spec["fp16_overflow_logit"]) > spec[
            "fp16_overflow_tolerance"]:
        wrong.append(f"fp16_overflow_logit = {logit!r} is not where exp overflows float16")
    if wrong:
        ctx.fail("value", "; ".join(wrong))


def performance_reference(shape, inputs, rows):
    """Expected rows of a timed call (graders/engine/performance.py picks which)."""
    return softmax64(inputs["x"])
