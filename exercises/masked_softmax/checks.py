"""Checks of the masked softmax exercise (trusted: runs in the checker).

The reference is the float64 softmax of z = x·scale + mask with causal
positions (j > i) at -inf; a row that is entirely -inf is all zeros.
"""

import numpy as np

from graders.engine.casekit import softmax64

NEG_INF = float("-inf")


def _logits(x, scale, mask, causal):
    z = x.to_f64() * scale
    if mask is not None:
        z = z + mask.to_f64()
    if causal:
        rows, cols = z.shape
        z = np.where(np.arange(cols)[None, :] > np.arange(rows)[:, None], NEG_INF, z)
    return z


def _masked_call(ctx, x, scale=1.0, mask=None, causal=False, notes=None):
    kwargs = {}
    if mask is not None:
        kwargs["mask"] = mask
    if causal:
        kwargs["causal"] = True
    y = yield ctx.call("masked_softmax", x, scale, **kwargs)
    z = _logits(x, scale, mask, causal)
    ctx.expect_rows(y, softmax64(z), dtype="float32", logits=z, notes=notes)


def _tail_mask(ctx, rows, cols, max_fraction=0.9):
    """[R, C] padding: each row loses a random tail (possibly none)."""
    keep = ctx.rng.integers(max(1, int(cols * (1 - max_fraction))), cols + 1, size=rows)
    mask = np.where(np.arange(cols)[None, :] >= keep[:, None], NEG_INF, 0.0)
    return ctx.array(mask)


def random_rows(ctx):
    for rows, cols in ctx.params["shapes"]:
        yield from _masked_call(ctx, ctx.randn((rows, cols), scale=3.0))


def scale(ctx):
    for rows, cols in ctx.params["shapes"]:
        for s in ctx.params["scales"]:
            yield from _masked_call(ctx, ctx.randn((rows, cols), scale=4.0), scale=s)


def causal(ctx):
    for rows, cols in ctx.params["shapes"]:
        yield from _masked_call(ctx, ctx.randn((rows, cols), scale=3.0), 0.5, causal=True)
        # causal on top of a broadcast padding mask that keeps column 0
        pad = _tail_mask(ctx, 1, cols, max_fraction=0.5)
        yield from _masked_call(ctx, ctx.randn((rows, cols), scale=3.0), 1.0, pad, causal=True)


def padding_mask(ctx):
    for rows, cols in ctx.params["shapes"]:
        yield from _masked_call(ctx, ctx.randn((rows, cols), scale=3.0), 1.0,
                                _tail_mask(ctx, rows, cols))
        yield from _masked_call(ctx, ctx.randn((rows, cols), scale=3.0), 0.5,
                                _tail_mask(ctx, 1, cols))
        # left padding: the first ~3/4 of a row masked, so whole leading tiles are empty
        left = np.zeros((rows, cols))
        left[rows // 2, : cols * 3 // 4] = NEG_INF
        notes = {rows // 2: f"whose first {cols * 3 // 4} columns are masked"}
        yield from _masked_call(ctx, ctx.randn((rows, cols), scale=3.0), 1.0, ctx.array(left),
                                notes=notes)


def fully_masked_row(ctx):
    for rows, cols in ctx.params["shapes"]:
        mask = _tail_mask(ctx, rows, cols, max_fraction=0.5).to_f64()
        empty = sorted({0, rows // 2, rows - 1})
        mask[empty] = NEG_INF
        notes = {r: "(its mask is all -inf)" for r in empty}
        yield from _masked_call(ctx, ctx.randn((rows, cols), scale=3.0), 1.0, ctx.array(mask),
                                notes=notes)


def poisoned_row(ctx):
    for rows, cols in ctx.params["shapes"]:
        values = ctx.rng.standard_normal((rows, cols)) * 2.0
        notes = {}
        for row, big in ((0, 100.0), (rows // 2, 1000.0)):
            col = int(ctx.rng.integers(cols // 2))
            values[row, col] = big
            notes[row] = f"after {big:g} at column {col}"
        values[1] += 100.0
        notes[1] = "after logits near 100.0"
        mask = np.zeros((rows, cols))
        mask[:, cols - cols // 4:] = NEG_INF
        yield from _masked_call(ctx, ctx.array(values), 1.0, ctx.array(mask), notes=notes)


def non_power_of_two_cols(ctx):
    for rows, cols in ctx.params["shapes"]:
        values = ctx.rng.standard_normal((rows, cols)) * 3.0
        values[::2] = ctx.rng.standard_normal((len(values[::2]), cols)) - 8.0
        yield from _masked_call(ctx, ctx.array(values))
        yield from _masked_call(ctx, ctx.array(values[::-1].copy()), 1.0, _tail_mask(ctx, 1, cols))


def additive_bias(ctx):
    for rows, cols in ctx.params["shapes"]:
        # an attention bias (ALiBi, relative positions): finite values of both signs, [R, C]
        bias = ctx.rng.standard_normal((rows, cols)) * 2.0
        yield from _masked_call(ctx, ctx.randn((rows, cols), scale=3.0), 0.5, ctx.array(bias),
                                notes={r: "with a finite bias of both signs" for r in range(rows)})
        # a soft mask: -1e4 where masked (what float16 attention code writes for -inf), and a
        # row whose mask is -20 everywhere: shifted, not masked, its softmax is softmax(x·scale).
        # (Not -1e4 there: float32 rounds x - 1e4 to 1e-3, far outside the tolerance; where
        # the row keeps 0 elsewhere, exp(-1e4 + x - max) is 0 in any precision.)
        soft = np.where(ctx.rng.random((rows, cols)) < 0.3, -1e4, 0.0)
        soft[rows // 2] = -20.0
        notes = {r: "with a soft mask of -1e4" for r in range(rows)}
        notes[rows // 2] = "whose mask is -20 everywhere (shifted, not masked)"
        yield from _masked_call(ctx, ctx.randn((rows, cols), scale=3.0), 1.0, ctx.array(soft),
                                notes=notes)
        # a large positive bias on a few columns, [1, C], beside -inf: the max must be taken
        # after the mask is added, or exp overflows
        big = np.zeros((1, cols))
        big[0, ctx.rng.choice(cols, size=3, replace=False)] = 100.0
        big[0, ctx.rng.choice(cols, size=cols // 4, replace=False)] = NEG_INF
        big[0, int(np.argmax(big[0]))] = 100.0  # at least one +100 survives the -inf
        yield from _masked_call(ctx, ctx.randn((rows, cols), scale=3.0), 1.0, ctx.array(big),
                                notes={r: "with a bias of +100 on a few columns" for r in range(rows)})


def tiny_shapes(ctx):
    for rows, cols in ctx.params["shapes"]:
        yield from _masked_call(ctx, ctx.randn((rows, cols), scale=3.0), 2.0)
        mask = _tail_mask(ctx, 1, cols, max_fraction=0.5)  # keeps column 0
        yield from _masked_call(ctx, ctx.randn((rows, cols), scale=3.0), 1.0, mask, causal=True)


def fresh_inputs(ctx):
    for rows, cols in ctx.params["shapes"]:
        for _ in range(int(ctx.params.get("calls", 4))):
            yield from _masked_call(ctx, ctx.randn((rows, cols), scale=3.0), 1.0,
                                    _tail_mask(ctx, rows, cols))


def performance_reference(shape, inputs, rows):
    """Expected rows of a timed call: z = x·scale + mask, causal j > i masked."""
    scale = float(shape.args[1])
    z = inputs["x"] * scale
    if shape.kwargs.get("mask") == "@mask":
        z = z + inputs["mask"]
    if shape.kwargs.get("causal"):
        cols = z.shape[1]
        z = np.where(np.arange(cols)[None, :] > np.asarray(rows)[:, None], NEG_INF, z)
    return softmax64(z)
