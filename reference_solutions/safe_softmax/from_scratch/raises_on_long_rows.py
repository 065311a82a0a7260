# expect: long_rows (only) — one program per row with the block sized to the row, and a host-side
# guard that raises for rows wider than one block may be: every other check passes and keeps its
# points, long_rows fails with the exception and its line
#
# Written from scratch, not from the reference: the design of Liger-Kernel's softmax
# (one program per row, a RuntimeError for rows it cannot hold).
"""Safe softmax, one program per row, that refuses rows it cannot hold.

A whole row is loaded into one block of next_power_of_2(n_cols) lanes, as in the Triton
tutorial, and the wrapper checks up front that the block fits: a row wider than 65536
columns raises a RuntimeError instead of asking the compiler for an impossible block.
Raising is honest, but the contract asks for rows of any length: the grader fails the
check whose call raised (long_rows), with the exception and this file's line, and the
other checks keep their points.
"""

import torch
import triton
import triton.language as tl

MAX_FUSED_SIZE = 65536  # the most elements one program may hold


@triton.jit
def _softmax_row(y_ptr, x_ptr, x_row_stride, y_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    in_row = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=in_row, other=float("-inf"))
    x = x.to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=in_row)


def _launch_config(n_cols):
    block = triton.next_power_of_2(n_cols)
    if block > MAX_FUSED_SIZE:
        raise RuntimeError(f"softmax: rows of {n_cols} columns need a block of {block}, "
                           f"more than the {MAX_FUSED_SIZE} one program may hold")
    num_warps = 4 if block < 2048 else 8 if block < 8192 else 16 if block < 32768 else 32
    return block, num_warps


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    block, num_warps = _launch_config(n_cols)
    y = torch.empty_like(x)
    _softmax_row[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols,
                            BLOCK_SIZE=block, num_warps=num_warps)
    return y
