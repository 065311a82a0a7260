# expect: rejected — the mask is applied with torch.where and torch addition before the kernel
# runs: torch computed part of the result, which the rules forbid
#
# Written from scratch: the "fuse later" first draft, where torch prepares the logits and
# Triton only does the softmax.
"""Masked softmax with the masking done in torch.

The logits z = x·scale + mask (and the causal -inf) are formed with torch operations, and
a Triton kernel takes the softmax of z. It gives the right numbers, but the exercise is the
fusion: z formed in registers, one read of x and one write of y. torch may allocate, view
and copy; ``x * scale``, ``+ mask`` and ``torch.where`` are computation, and the grader
rejects the submission at the first of them.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows(z_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    z = tl.load(z_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
    m = tl.max(z, axis=0)
    m = tl.where(m == float("-inf"), 0.0, m)
    p = tl.exp(z - m)
    s = tl.sum(p, axis=0)
    tl.store(y_ptr + row * n_cols + cols, p / tl.where(s == 0.0, 1.0, s), mask=cols < n_cols)


def masked_softmax(x, scale, mask=None, causal=False):
    z = x * scale
    if mask is not None:
        z = z + mask
    if causal:
        rows, cols = x.shape
        above = torch.ones(rows, cols, dtype=torch.bool, device=x.device).triu(1)
        z = torch.where(above, float("-inf"), z)
    y = torch.empty_like(x)
    _softmax_rows[(x.shape[0],)](z.contiguous(), y, x.shape[1],
                                 BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
