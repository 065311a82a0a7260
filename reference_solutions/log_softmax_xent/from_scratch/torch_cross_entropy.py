# expect: rejected — cross_entropy calls torch.nn.functional.cross_entropy and a Triton kernel
# only copies the loss; log_softmax is a real kernel, so the refusal comes from the loss
#
# Written from scratch, not from the reference: the other shortcut, the framework's own
# fused loss. Its math is torch's, which the rules refuse however the result is returned.
"""A Triton log_softmax (one program a row, two reads), and cross_entropy handed to torch."""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

ANSWERS = {"bytes_composed": 0, "bytes_fused": 0, "bytes_xent": 0}


@triton.jit
def _log_softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = tl.max(tl.full([BLOCK], float("-inf"), tl.float32), axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols,
                    other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.exp(x - shift)
        m = m_new
    shift = tl.where(m == float("-inf"), 0.0, m)
    log_s = tl.log(tl.sum(s, axis=0))
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols,
                    other=float("-inf")).to(tl.float32)
        y = tl.where(m == float("-inf"), float("-inf"), (x - shift) - log_s)
        tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=ok), mask=ok)


def log_softmax(x):
    y = torch.empty_like(x)
    _log_softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=1024)
    return y


def cross_entropy(x, target, ignore_index=-100, reduction="mean"):
    loss = F.cross_entropy(x.float(), target, ignore_index=ignore_index, reduction=reduction)
    out = torch.empty_like(loss)
    _copy_kernel[(triton.cdiv(max(loss.numel(), 1), 1024),)](loss, out, loss.numel(), BLOCK=1024)
    return out
