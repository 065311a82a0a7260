# expect: rejected — the softmax is computed in numpy on the host and copied back, with a Triton
# kernel launched that does nothing: the work is not done in a kernel on the device, which the
# grader refuses on the CPU interpreter exactly as on the GPU
#
# Written from scratch: a round trip through numpy, the shortcut a student takes when the
# kernel will not come right.
"""Softmax through numpy: right numbers, wrong place.

The wrapper takes the tensor's data out of torch (``x.numpy()``; on a GPU that needs
``x.cpu()`` first), computes a safe softmax with numpy on the host, and copies the result
into the output tensor. A trivial kernel is launched on the output so that a Triton
kernel ran. The exercise is to do the work in a Triton kernel on the device: the grader
refuses any data leaving torch during a call (``.numpy()``, ``numpy.asarray``,
``.tolist()``, DLPack, ``.cpu()``), on the CPU as on the GPU.
"""

import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _touch(y_ptr):
    pass  # launched so that "a kernel ran"; it does no work


def softmax(x: torch.Tensor) -> torch.Tensor:
    host = x.detach().cpu().numpy().astype(np.float64)
    shifted = host - host.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    result = torch.from_numpy((e / e.sum(axis=1, keepdims=True)).astype(np.float32))
    y = torch.empty_like(x)
    y.copy_(result.to(device=x.device, dtype=x.dtype))
    _touch[(1,)](y)
    return y
