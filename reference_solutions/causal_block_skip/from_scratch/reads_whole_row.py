# expect: passed — correct everywhere: the causal mask is applied in registers, after the whole
# row of x has been loaded, so every check passes; but it reads the masked columns too
#
# The module's Lab 2 fused kernel as it is ("the fused kernel loads the whole row even for causal
# rows, deliberately"), written from scratch, not from the reference: 1 read of the whole row +
# 1 write. On a GPU it earns fewer speed points than the reference, since the timed shapes count
# only the bytes the causal structure requires (x where visible + all of y): at the copy's own
# speed it would reach at most 0.75 of copy at 4096×4096 offset 0 (134217728 bytes moved for
# 100671488 counted), 0.64 at 8192×8192 bfloat16 offset -2048 and 0.78 at 2048×16384 offset 8192.
"""Causal softmax, the fused way: load the row, mask it in registers, softmax, store.

Row i sees the columns j <= i + offset. Each program takes one row; a row that fits in
one block is loaded whole (every column, masked or not), the columns past the diagonal set
to -inf, and the softmax taken in float32. A longer row is walked twice in tiles: an online
(max, sum) over every tile, then a normalising pass over every tile. A row with no visible
column has max -inf: the shift is guarded, so it comes out as zeros, never NaN.
"""

import torch
import triton
import triton.language as tl

# The default shape's answers (R = C = 4096, offset 0, float32).
ANSWERS = {"bytes_fused": 134217728, "bytes_causal": 100671488}

WHOLE_ROW_MAX = 8192  # widest row loaded as one block
CHUNK = 2048          # tile width past that


@triton.jit
def _whole_row(x_ptr, y_ptr, n_cols, stride_x, stride_y, offset, scale,
               BLOCK: tl.constexpr):
    i = tl.program_id(0)
    j = tl.arange(0, BLOCK)
    inside = j < n_cols
    x = tl.load(x_ptr + i.to(tl.int64) * stride_x + j, mask=inside, other=0.0)
    seen = inside & (j <= i + offset)           # the causal mask, applied after the load
    z = tl.where(seen, x.to(tl.float32) * scale, float("-inf"))
    top = tl.max(z, 0)
    top = tl.where(top == float("-inf"), 0.0, top)  # a row that sees nothing
    e = tl.exp(z - top)
    total = tl.sum(e, 0)
    total = tl.where(total == 0.0, 1.0, total)
    tl.store(y_ptr + i.to(tl.int64) * stride_y + j, (e / total).to(y_ptr.dtype.element_ty),
             mask=inside)


@triton.jit
def _chunked_row(x_ptr, y_ptr, n_cols, stride_x, stride_y, offset, scale,
                 CHUNK: tl.constexpr):
    i = tl.program_id(0)
    x_row = x_ptr + i.to(tl.int64) * stride_x
    y_row = y_ptr + i.to(tl.int64) * stride_y
    j0 = tl.arange(0, CHUNK)
    run_max = tl.full([CHUNK], float("-inf"), tl.float32)
    run_sum = tl.zeros([CHUNK], tl.float32)
    for c in range(0, n_cols, CHUNK):
        j = c + j0
        x = tl.load(x_row + j, mask=j < n_cols, other=0.0)
        z = tl.where((j < n_cols) & (j <= i + offset), x.to(tl.float32) * scale, float("-inf"))
        new_max = tl.maximum(run_max, z)
        safe = tl.where(new_max == float("-inf"), 0.0, new_max)
        run_sum = run_sum * tl.exp(run_max - safe) + tl.exp(z - safe)
        run_max = new_max
    top = tl.max(run_max, 0)
    safe_top = tl.where(top == float("-inf"), 0.0, top)
    total = tl.sum(run_sum * tl.exp(run_max - safe_top), 0)
    total = tl.where(total == 0.0, 1.0, total)
    for c in range(0, n_cols, CHUNK):
        j = c + j0
        x = tl.load(x_row + j, mask=j < n_cols, other=0.0)
        z = tl.where((j < n_cols) & (j <= i + offset), x.to(tl.float32) * scale, float("-inf"))
        tl.store(y_row + j, (tl.exp(z - safe_top) / total).to(y_ptr.dtype.element_ty),
                 mask=j < n_cols)


def causal_softmax(x, offset=0, scale=1.0):
    rows, cols = x.shape
    y = torch.empty_like(x)
    if rows == 0 or cols == 0:
        return y
    offset = max(-rows - 1, min(int(offset), cols))
    if cols <= WHOLE_ROW_MAX:
        block = triton.next_power_of_2(cols)
        _whole_row[(rows,)](x, y, cols, x.stride(0), y.stride(0), offset, float(scale),
                            BLOCK=block, num_warps=4 if block <= 2048 else 8)
    else:
        _chunked_row[(rows,)](x, y, cols, x.stride(0), y.stride(0), offset, float(scale),
                              CHUNK=CHUNK, num_warps=8)
    return y
