"""torch's own answer to this exercise, for ``python -m graders bench``: the causal mask as
a boolean tensor and torch's softmax (what a framework does without a fused kernel; it
reads the whole row and gives NaN for a fully masked row, which bench does not judge)."""

import torch


def causal_softmax(x, offset=0, scale=1.0):
    rows, cols = x.shape
    keep = torch.ones(rows, cols, dtype=torch.bool, device=x.device).tril(diagonal=offset)
    z = (x.float() * scale).masked_fill(~keep, float("-inf"))
    return torch.softmax(z, dim=-1).to(x.dtype)
