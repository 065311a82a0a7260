# expect: poisoned_row, underflow, long_rows — exp(x) without subtracting the row max: a logit
# of 100 overflows to inf (inf / inf = NaN for the row), a row of -1000s underflows to 0 / 0 =
# NaN; and one program holds a whole row, too big past 65536 columns
#
# Written from scratch, not from the reference: the Triton tutorial's design,
# one program per row, with a naive exp.
"""Naive softmax in the style of the Triton tutorial's fused softmax: one program per row.

Each program loads its whole row into one block of BLOCK_SIZE = next_power_of_2(n_cols)
lanes and computes exp(x) / sum(exp(x)) directly, in float32, with the padding lanes read
as -inf and the store masked.

The bug: the row max is never subtracted. exp(100.0) is +inf in float32, and one inf
makes the sum inf and every element inf / inf = NaN (`poisoned_row`). At the other end,
exp(-1000.0) underflows to 0 for every element and the row becomes 0 / 0 = NaN
(`underflow`). Subtracting the max changes nothing mathematically but keeps every
exponent <= 0 with the largest term exactly 1.

It also shares the one-program-per-row flaw: a row of more than 65536 columns asks for a
block larger than one program may hold (`long_rows`).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_row_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride,
                        BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: row * stride may pass 2**31
    cols = tl.arange(0, BLOCK_SIZE)      # BLOCK_SIZE is a power of two >= n_cols
    in_row = cols < n_cols

    # Padding lanes read as -inf, so exp gives 0 and they add nothing to the sum.
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=in_row, other=float("-inf"))
    x = x.to(tl.float32)                 # statistics in float32 whatever the storage type

    p = tl.exp(x)                        # BUG: no max subtracted; inf above x = 88.7,
    s = tl.sum(p, axis=0)                # and 0 for every element of a very negative row
    y = p / s

    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=in_row)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)  # the whole row in one block
    # More warps for wider blocks, so each thread holds a modest slice of the row.
    num_warps = 4
    if BLOCK_SIZE >= 2048:
        num_warps = 8
    if BLOCK_SIZE >= 4096:
        num_warps = 16
    _softmax_row_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0),
                                   BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return y
