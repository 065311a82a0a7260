"""torch's own answer to this exercise: the peer every reference is compared with in
``python -m graders bench`` (trusted code; never used to grade)."""

import torch
import torch.nn.functional as F


def log_softmax(x):
    return torch.log_softmax(x, dim=-1)


def cross_entropy(x, target, ignore_index=-100, reduction="mean"):
    return F.cross_entropy(x, target, ignore_index=ignore_index, reduction=reduction)
