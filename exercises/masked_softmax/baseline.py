"""torch's own answer to this exercise, for ``python -m graders bench``: scale, mask and
softmax as separate torch ops (what a framework does without a fused kernel)."""

import torch


def masked_softmax(x, scale, mask=None, causal=False):
    z = x * scale
    if mask is not None:
        z = z + mask
    if causal:
        rows, cols = z.shape
        keep = torch.ones(rows, cols, dtype=torch.bool, device=x.device).tril()
        z = z.masked_fill(~keep, float("-inf"))
    return torch.softmax(z, dim=-1)
