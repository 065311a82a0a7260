"""torch's own answer to this exercise: the peer every reference is compared with in
``python -m graders bench`` (trusted code; never used to grade)."""

import torch


def softmax(x):
    return torch.softmax(x, dim=-1)
