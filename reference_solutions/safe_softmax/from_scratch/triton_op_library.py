# expect: passed — the kernel is reached through a torch operator made with
# torch.library.triton_op and wrap_triton: the launch is counted where every launch passes, and
# the operator's body is held to the same rules as any other code
#
# Written from scratch: the packaging torch recommends for Triton kernels (torch 2.6 and
# later), so that torch.compile and export can see inside them.
"""Safe softmax as a torch custom operator whose body launches a Triton kernel.

``torch.library.triton_op("a07::softmax", ...)`` registers a Python function as a torch
operator; inside it, ``wrap_triton(kernel)[grid](...)`` launches the kernel so that
torch's compiler could trace it. Called eagerly, as the grader calls it, the operator
runs its body: an allocation and one launch. The kernel walks each row in tiles with a
running (max, sum), then normalises.
"""

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

TILE = 2048


@triton.jit
def _softmax_tiled(y_ptr, x_ptr, n_cols, x_row_stride, y_row_stride, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    m = tl.full([TILE], float("-inf"), tl.float32)
    s = tl.zeros([TILE], tl.float32)
    for start in range(0, n_cols, TILE):
        cols = start + tl.arange(0, TILE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # a lane of -inf so far
        s = s * tl.exp(m - ref) + tl.exp(x - ref)
        m = m_new
    row_max = tl.max(m, axis=0)
    inv = 1.0 / tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, TILE):
        cols = start + tl.arange(0, TILE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        tl.store(y_ptr + row * y_row_stride + cols, (tl.exp(x - row_max) * inv).to(
            y_ptr.dtype.element_ty), mask=cols < n_cols)


@triton_op("a07::softmax", mutates_args={})
def _softmax_op(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    tile = min(TILE, triton.next_power_of_2(x.shape[1]))
    wrap_triton(_softmax_tiled)[(x.shape[0],)](y, x, x.shape[1], x.stride(0), y.stride(0),
                                               TILE=tile)
    return y


def softmax(x: torch.Tensor) -> torch.Tensor:
    return _softmax_op(x)
