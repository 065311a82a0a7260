# expect: long_rows — one program holds a whole row in a block of next_power_of_2(n_cols) lanes,
# so a row of more than 65536 columns asks for a block larger than one program may hold
#
# Written from scratch, not from the reference: the Triton tutorial's design,
# one program per row (its block grows with the row).
"""Safe softmax in the style of the Triton tutorial's fused softmax: one program per row.

Each program loads its whole row into one block of BLOCK_SIZE = next_power_of_2(n_cols)
lanes, takes the max, exponentiates the shifted row, sums, divides and stores: the row is
read once and written once. The math is right (max subtracted, statistics in float32,
padding lanes loaded as -inf, store masked).

The flaw is the design, not the math: the block grows with the row. A row of 100003
columns asks for a block of 131072 elements, more than one program may hold (65536), so
`long_rows` fails. Rows that long must be tiled: loop over the row carrying the running
(max, sum), or split it across programs and merge the partial statistics.
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

    # Padding lanes (cols >= n_cols) read as -inf: the identity of max, and exp(-inf) = 0
    # keeps them out of the sum too.
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=in_row, other=float("-inf"))
    x = x.to(tl.float32)                 # statistics in float32 whatever the storage type

    m = tl.max(x, axis=0)                # subtract the max: every exponent is <= 0
    p = tl.exp(x - m)                    # in [0, 1]; the max element gives exactly 1
    s = tl.sum(p, axis=0)                # >= 1, so the division is safe
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
