# expect: rejected — log_softmax is torch.log(torch.softmax(x)), the composition the course
# warns against, computed by torch; the Triton kernel only copies the result
#
# Written from scratch, not from the reference: the shortcut a student takes first. Both
# the precision (log of a probability that underflowed to 0) and the traffic (softmax
# written out and read back) are lost, and the math is torch's, which the rules refuse.
"""log_softmax and cross_entropy as torch compositions, each result copied by a Triton
kernel so that a kernel is launched."""

import torch
import triton
import triton.language as tl

ANSWERS = {"bytes_composed": 0, "bytes_fused": 0, "bytes_xent": 0}


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=ok), mask=ok)


def _copied(tmp):
    out = torch.empty_like(tmp)
    n = tmp.numel()
    _copy_kernel[(triton.cdiv(max(n, 1), 1024),)](tmp, out, n, BLOCK=1024)
    return out


def log_softmax(x):
    return _copied(torch.log(torch.softmax(x.float(), dim=-1)).to(x.dtype))


def cross_entropy(x, target, ignore_index=-100, reduction="mean"):
    logp = torch.log(torch.softmax(x.float(), dim=-1))
    keep = target != ignore_index
    picked = logp.gather(1, target.clamp(min=0)[:, None])[:, 0]
    loss = torch.where(keep, -picked, torch.zeros_like(picked))
    if reduction == "none":
        return _copied(loss)
    return _copied(loss.sum() / keep.sum().clamp(min=1))
