# expect: long_rows (only) — one program per row (the block sized to the row) with num_warps
# autotuned over 1 to 32 for each row length: right on every row one program may hold, refused on
# longer ones, and every config of the refused block is refused before it compiles
#
# Written from scratch, not from the reference: the design of attorch's softmax (one
# block per row, `@triton.autotune` over the number of warps, keyed on the row length).
"""Safe softmax with the number of warps autotuned per row length.

``@triton.autotune`` compiles and times the kernel once per config the first time it
sees a new key (here the row length and, implicitly, the dtype), then keeps the fastest.
That costs a compile per config per key, inside the call that meets the key: the
grader's budget for a call covers it (statement: autotuning). The kernel is the
tutorial's one-program-per-row design, so a row over 65536 columns is refused.
"""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({}, num_warps=w) for w in (1, 2, 4, 8, 16, 32)],
                 key=["n_cols"])
@triton.jit
def _softmax_row(y_ptr, x_ptr, x_row_stride, y_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    in_row = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=in_row, other=float("-inf"))
    x = x.to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=in_row)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    _softmax_row[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols,
                            BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return y
