# expect: rejected — the softmax is computed with torch.softmax; the Triton kernel only copies
# the result
#
# Written from scratch, not from the reference: torch.softmax computes the
# result and a Triton kernel only copies it.
"""Looks like a Triton solution, but the math is torch's: a Triton kernel copies a result
that torch.softmax computed."""

import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=ok), mask=ok)


def softmax(x: torch.Tensor) -> torch.Tensor:
    tmp = torch.softmax(x.float(), dim=1).to(x.dtype)
    y = torch.empty_like(tmp)
    n = tmp.numel()
    _copy_kernel[(triton.cdiv(n, 1024),)](tmp, y, n, BLOCK=1024)
    return y
