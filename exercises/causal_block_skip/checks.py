"""Checks of the causal block-skipping softmax (trusted: runs in the checker).

Row i sees the columns j ≤ i + offset. The reference is the float64 softmax of x·scale over
those columns, with -inf everywhere else; a row that sees no column (i + offset < 0) is all
zeros. ANSWERS is judged against the bytes counted for the submission's own parameters.
"""

import numpy as np

from graders.engine.casekit import softmax64

NEG_INF = float("-inf")


def visible(rows, cols, offset):
    """n_i = min(C, max(0, i + offset + 1)): how many leading columns row i sees."""
    return np.clip(np.arange(rows, dtype=np.int64) + offset + 1, 0, cols)


def _logits(x64, offset, scale, rows=None):
    """x·scale with -inf past each row's diagonal; ``rows``: the rows' own indices."""
    n_rows, cols = x64.shape
    index = np.arange(n_rows) if rows is None else np.asarray(rows)
    hidden = np.arange(cols)[None, :] > (index[:, None] + offset)
    return np.where(hidden, NEG_INF, x64 * scale)


def _call(ctx, x, offset, scale=1.0, notes=None):
    y = yield ctx.call("causal_softmax", x, offset=offset, scale=scale)
    z = _logits(x.to_f64(), offset, scale)
    ctx.expect_rows(y, softmax64(z), dtype=x.dtype, logits=z, notes=notes)


def _sees(rows, cols, offset, what=""):
    """Notes naming how many columns each row sees (for the failure's text)."""
    n = visible(rows, cols, offset)
    return {r: f"(offset {offset}: it sees {n[r]} of {cols} columns{what})" for r in range(rows)}


def causal_rows(ctx):
    for rows, cols in ctx.params["shapes"]:
        for scale in ctx.params["scales"]:
            yield from _call(ctx, ctx.randn((rows, cols), scale=3.0), 0, scale,
                             notes=_sees(rows, cols, 0))


def masked_tiles(ctx):
    for rows, cols in ctx.params["shapes"]:
        # first every column visible, then most tiles of most rows wholly past the diagonal:
        # a kernel that leaves the skipped tiles unwritten may find the first call's values
        # there (an allocator hands the same block back), though nothing guarantees it
        yield from _call(ctx, ctx.randn((rows, cols), scale=3.0), cols, 1.0)
        for offset in (3, cols // 5):
            yield from _call(ctx, ctx.randn((rows, cols), scale=3.0), offset, 0.5,
                             notes=_sees(rows, cols, offset))


def fully_masked_rows(ctx):
    for rows, cols in ctx.params["shapes"]:
        for offset in (-(rows // 2), -rows):
            notes = _sees(rows, cols, offset)
            for r in range(min(rows, -offset)):
                notes[r] = f"(offset {offset}: i + offset = {r + offset} < 0, it sees no column)"
            yield from _call(ctx, ctx.randn((rows, cols), scale=3.0), offset, 1.0, notes=notes)


def straddling_tile(ctx):
    for rows, cols in ctx.params["shapes"]:
        # the diagonal crosses a power-of-two column, so it cuts a tile of any power-of-two
        # width up to that one: row by row the visible part ends rows/2 columns before it to
        # rows/2 - 1 after it
        edge = 1 << (cols.bit_length() - 1)
        offset = edge - rows // 2 - 1
        values = ctx.rng.standard_normal((rows, cols))
        n = visible(rows, cols, offset)
        notes = {}
        for r in range(rows):
            if n[r] > 0:
                values[r, n[r] - 1] = 6.0  # the row's max, the last column it sees
            if n[r] < cols:
                values[r, n[r]] = 9.0  # larger, at the first column it must not see
            notes[r] = (f"(offset {offset}: it sees columns 0..{n[r] - 1}; 6.0 at the last of "
                        f"them, 9.0 at column {n[r]}, the first masked one)")
        yield from _call(ctx, ctx.array(values), offset, 1.0, notes=notes)


def nothing_masked(ctx):
    for rows, cols in ctx.params["shapes"]:
        for offset in (cols - 1, cols, 10 * cols):
            yield from _call(ctx, ctx.randn((rows, cols), scale=3.0), offset, 1.0,
                             notes=_sees(rows, cols, offset))


def long_rows(ctx):
    for rows, cols in ctx.params["shapes"]:
        for offset in (cols // 3, cols - rows // 2 - 1):
            yield from _call(ctx, ctx.randn((rows, cols), scale=3.0), offset, 1.0,
                             notes=_sees(rows, cols, offset))


def half_precision(ctx):
    for rows, cols in ctx.params["shapes"]:
        for dtype in ctx.params["dtypes"]:
            for offset in (0, cols // 4):
                yield from _call(ctx, ctx.randn((rows, cols), dtype, scale=3.0), offset, 1.0,
                                 notes=_sees(rows, cols, offset))


def poisoned_row(ctx):
    for rows, cols in ctx.params["shapes"]:
        offset = cols // 2
        n = visible(rows, cols, offset)
        values = ctx.rng.standard_normal((rows, cols)) * 2.0
        notes = {}
        for row, big in ((0, 100.0), (rows // 2, 1000.0)):
            col = int(ctx.rng.integers(n[row]))
            values[row, col] = big
            notes[row] = f"after {big:g} at column {col} (visible)"
        values[1, : n[1]] += 100.0
        notes[1] = "whose visible logits are near 100.0"
        values[2, n[2]:] = 1000.0
        notes[2] = f"whose masked columns ({n[2]} on) hold 1000.0"
        yield from _call(ctx, ctx.array(values), offset, 1.0, notes=notes)


# -- the traffic question --------------------------------------------------------------------

def byte_counts(element_bytes, rows, cols, offset, dtype):
    """(bytes_fused, bytes_causal) for an R×C tensor of ``dtype`` seen with ``offset``."""
    size = element_bytes[dtype]
    tensor = size * rows * cols
    return 2 * tensor, tensor + size * int(visible(rows, cols, offset).sum())


PARAMS = ("rows", "cols", "offset", "dtype")


def _shape(values):
    rows, cols, offset, dtype = values
    return f"R = {rows}, C = {cols}, offset {offset}, {dtype}"


def _counted_for(ctx, sizes, counts):
    """Every combination the spec's [params] allow whose byte counts are ``counts``, the
    example (the defaults) first: a student who answers for one of them copied, or took the
    statement's example, rather than counted for their own."""
    declared = [ctx.param_specs[name] for name in PARAMS]
    example = tuple(p.default for p in declared)
    combos = [example] + [(r, c, o, d) for r in declared[0].choices for c in declared[1].choices
                          for o in declared[2].choices for d in declared[3].choices
                          if (r, c, o, d) != example]
    return [v for v in combos if byte_counts(sizes, *v) == counts]


def byte_count_answers(ctx):
    sizes = ctx.data["answers"]["element_bytes"]
    answers = ctx.attributes.get("ANSWERS")
    if not isinstance(answers, dict):
        ctx.fail("type", "ANSWERS must be a dict with bytes_fused and bytes_causal")
    mine = tuple(ctx.submission_params[name] for name in PARAMS)
    expected = byte_counts(sizes, *mine)
    keys = ("bytes_fused", "bytes_causal")
    given = tuple(answers.get(key) for key in keys)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in given)
    if numbers and given != expected and (other := _counted_for(ctx, sizes, given)):
        more = ", or another of the same size" if len(other) > 1 else ""
        ctx.fail("value", f"bytes_fused = {given[0]!r} and bytes_causal = {given[1]!r} are the "
                          f"counts for a different shape ({_shape(other[0])}{more}), not for "
                          f"yours, {_shape(mine)} (the one your exercise page shows; offline, "
                          "give it to `grade --params`)")
    wrong = [f"{key} = {value!r} is not the bytes moved for your {_shape(mine)}"
             for key, value, want in zip(keys, given, expected)
             if not isinstance(value, (int, float)) or isinstance(value, bool) or value != want]
    if wrong:
        ctx.fail("value", "; ".join(wrong))


def performance_reference(shape, inputs, rows):
    """Expected rows of a timed call: its offset and scale are the spec's kwargs."""
    offset = int(shape.kwargs.get("offset", 0))
    scale = float(shape.kwargs.get("scale", 1.0))
    return softmax64(_logits(inputs["x"], offset, scale, rows))
