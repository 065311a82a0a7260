"""A hostile safe_softmax: it allocates GPU memory until there is none left.

torch.empty is allowed (it is how a submission makes its output), so nothing refuses the
calls themselves: the submission keeps 1 GiB blocks alive until the allocator fails with
CUDA out of memory (memory_limit expected), then the grader must kill it and the slot must
get all of the GPU's memory back for the next job. Meant for the GPU; on the CPU the
blocks are never touched, so they grow the address space rather than the memory used.
"""

import torch
import triton
import triton.language as tl

_hoard = []  # kept at module level, so nothing is freed between calls


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def softmax(x: torch.Tensor) -> torch.Tensor:
    while True:  # ends only when the allocator raises
        _hoard.append(torch.empty(1 << 30, dtype=torch.uint8, device=x.device))
    y = torch.empty_like(x)  # never reached
    _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
