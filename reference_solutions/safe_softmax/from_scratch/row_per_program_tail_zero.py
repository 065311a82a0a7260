# expect: non_power_of_two_cols, long_rows — the padding lanes past n_cols are loaded as 0.0
# instead of -inf, so they can win the max of a negative row and each adds exp(0 - m) to the
# sum; and one program holds a whole row, too big past 65536 columns
#
# Written from scratch, not from the reference: the Triton tutorial's design,
# one program per row, with the tail loaded as 0.0.
"""Safe softmax in the style of the Triton tutorial's fused softmax, with a bad padding value.

Each program loads its whole row into one block of BLOCK_SIZE = next_power_of_2(n_cols)
lanes, subtracts the row max, exponentiates in float32, sums, divides and stores (masked).

The bug: when n_cols is not a power of two, the lanes past the end of the row are loaded
with other=0.0. Those zeros take part in the reductions: in a row of negative numbers 0.0
wins the max, and every padding lane adds exp(0 - m) to the denominator, so the row no
longer sums to 1 (`non_power_of_two_cols`, and any other check whose rows are not a power
of two wide). Padding lanes must be loaded as -inf, the identity of max, which exp turns
into 0, the identity of the sum.

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

    # BUG: padding lanes read as 0.0, a real value to tl.max and tl.sum (should be -inf).
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=in_row, other=0.0)
    x = x.to(tl.float32)                 # statistics in float32 whatever the storage type

    m = tl.max(x, axis=0)                # a padding 0.0 beats a row of negative numbers
    p = tl.exp(x - m)                    # each padding lane contributes exp(0 - m) > 0
    s = tl.sum(p, axis=0)                # ...to this sum, so the real lanes get too little
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
