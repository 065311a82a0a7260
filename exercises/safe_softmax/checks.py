"""Checks of the safe softmax exercise (trusted: runs in the checker, never in the runner).

Each function is a check named in spec.toml: it makes inputs, yields calls of
the student's ``softmax`` and judges the outputs against a float64 softmax.
"""

from graders.engine.casekit import softmax64


def _softmax_call(ctx, x, notes=None):
    """Call softmax(x) and judge it against the float64 reference."""
    y = yield ctx.call("softmax", x)
    logits = x.to_f64()
    ctx.expect_rows(y, softmax64(logits), dtype=x.dtype, logits=logits, notes=notes)


def _each(ctx):
    for rows, cols in ctx.params["shapes"]:
        for dtype in ctx.params["dtypes"]:
            yield rows, cols, dtype


def random_rows(ctx):
    for rows, cols, dtype in _each(ctx):
        yield from _softmax_call(ctx, ctx.randn((rows, cols), dtype, scale=3.0))


def poisoned_row(ctx):
    for rows, cols, dtype in _each(ctx):
        values = ctx.rng.standard_normal((rows, cols)) * 2.0
        notes = {}
        for row, big in ((0, 100.0), (rows // 2, 1000.0), (rows - 1, 100.0)):
            col = int(ctx.rng.integers(cols))
            values[row, col] = big
            notes[row] = f"after {big:g} at column {col}"
        values[1] += 100.0  # a whole row near 100: every naive exp overflows
        notes[1] = "after logits near 100.0"
        yield from _softmax_call(ctx, ctx.array(values, dtype), notes)


def half_precision_overflow(ctx):
    for rows, cols, dtype in _each(ctx):
        values = ctx.rng.uniform(10.0, 15.0, (rows, cols))
        values[:, int(ctx.rng.integers(cols))] = 12.0
        notes = {r: "with float16 logits between 10 and 15" for r in range(rows)}
        yield from _softmax_call(ctx, ctx.array(values, dtype), notes)


def non_power_of_two_cols(ctx):
    for rows, cols, dtype in _each(ctx):
        values = ctx.rng.standard_normal((rows, cols)) * 3.0
        values[::2] = ctx.rng.standard_normal((len(values[::2]), cols)) - 8.0  # all negative
        yield from _softmax_call(ctx, ctx.array(values, dtype))


def long_rows(ctx):
    for rows, cols, dtype in _each(ctx):
        values = ctx.rng.standard_normal((rows, cols)) * 3.0
        # the row max sits in the far end of each row, past any fixed block
        for r in range(rows):
            values[r, int(ctx.rng.integers(cols * 3 // 4, cols))] = 12.0
        yield from _softmax_call(ctx, ctx.array(values, dtype))


def tiny_rows(ctx):
    for rows, cols, dtype in _each(ctx):
        yield from _softmax_call(ctx, ctx.randn((rows, cols), dtype, scale=3.0))


def underflow(ctx):
    for rows, cols, dtype in _each(ctx):
        values = ctx.rng.standard_normal((rows, cols)) - 1000.0
        half = rows // 2
        notes = {r: "with logits near -1000" for r in range(half)}
        values[half:] = ctx.rng.standard_normal((rows - half, cols)) * 3.0
        mask = ctx.rng.random((rows - half, cols)) < 0.1
        values[half:][mask] = -1e30
        yield from _softmax_call(ctx, ctx.array(values, dtype), notes)


def fresh_inputs(ctx):
    for rows, cols, dtype in _each(ctx):
        for _ in range(int(ctx.params.get("calls", 4))):
            yield from _softmax_call(ctx, ctx.randn((rows, cols), dtype, scale=3.0))


def performance_reference(shape, inputs, rows):
    """Expected rows of a timed call (graders/engine/performance.py picks which)."""
    return softmax64(inputs["x"])
