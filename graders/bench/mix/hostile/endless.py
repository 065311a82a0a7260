"""A hostile safe_softmax: its kernel never ends.

Before the (correct) softmax, every program spins in a loop whose exit test is "the
running value became NaN". The value starts at the row's first logit and is mapped by
v -> v * 0.5 + 1, which stays finite (it tends to 2.0) for every finite input, and at +-inf
for an infinite one: the loop never exits. The compiler cannot prove that, because the
start value is loaded at run time, and the loop stores to memory on every iteration,
so it cannot be removed as dead code either. Meant for the GPU (timeout expected); on
the CPU interpreter it spins in Python until the wall-clock limit.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _spin_then_softmax(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    v = tl.load(x_ptr + row * x_stride).to(tl.float32)
    while v == v:  # false only for NaN, which v never becomes
        v = v * 0.5 + 1.0
        tl.store(y_ptr + row * y_stride, v.to(y_ptr.dtype.element_ty))
    # never reached: a plain safe softmax of a row that fits one block
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=ok, other=float("-inf")).to(tl.float32)
    p = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * y_stride + cols, (p / tl.sum(p, axis=0)).to(y_ptr.dtype.element_ty),
             mask=ok)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    block = min(triton.next_power_of_2(n_cols), 4096)
    _spin_then_softmax[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=block)
    return y
