"""torch's own answer to this exercise's timed entry point, for ``python -m graders bench``."""

import torch


def online_softmax(x):
    return torch.softmax(x, dim=-1)
