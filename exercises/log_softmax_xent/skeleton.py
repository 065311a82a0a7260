"""A07 stretch: log_softmax and a fused cross-entropy in Triton. Read statement.md, then
fill in the TODOs.

log softmax(x)_i = (x_i - m) - log(s),   m = max_j x_j,   s = sum_j exp(x_j - m)
loss_r = -log softmax(x_r)[t_r] = (m - x[r, t_r]) + log(s)
"""

import torch
import triton
import triton.language as tl

# TODO: the Traffic question, for the R, C and dtype on your exercise page (statement.md).
ANSWERS = {
    "bytes_composed": None,  # TODO: int, bytes moved by log(softmax(x)) as two kernels
    "bytes_fused": None,     # TODO: int, bytes moved by the fused log_softmax
    "bytes_xent": None,      # TODO: int, bytes moved by the fused cross_entropy (reduction="none")
}


@triton.jit
def _log_softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride,
                        BLOCK_N: tl.constexpr):
    """One program per row (a starting point: rows longer than one block are yours to tile)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)  # BLOCK_N is a power of two >= n_cols
    # TODO: load the row (mask=cols < n_cols, other=-inf), convert to float32.
    # TODO: m = row max; s = sum(exp(x - m)); y = (x - m) - log(s). No division, and never
    #       log(exp(x - m) / s).
    # TODO: a row that is entirely -inf: m = -inf, and x - m is NaN. What does the statement
    #       say such a row gives?
    # TODO: store y in y's dtype (y_ptr.dtype.element_ty), masked.
    pass


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    """log softmax of each row of a 2-D float32/float16/bfloat16 tensor: a new tensor of
    x's shape and dtype."""
    # TODO: allocate y (torch.empty_like(x)), choose BLOCK_N and launch one program a row.
    # TODO: rows longer than one program may hold (65,536 elements): tile them.
    raise NotImplementedError("TODO: log_softmax")


def cross_entropy(x: torch.Tensor, target: torch.Tensor, ignore_index: int = -100,
                  reduction: str = "mean") -> torch.Tensor:
    """Mean over the rows not ignored of -log softmax(x)[r, target[r]] (a 0-d float32
    tensor, 0.0 when every row is ignored), or with reduction="none" each row's loss
    (float32 [R], 0.0 on ignored rows)."""
    # TODO: a kernel that reads each row of logits once, carrying the running (max, sum),
    #       and writes one float32 loss a row: (m - x[r, t]) + log(s), 0.0 where
    #       target[r] == ignore_index, never a softmax or log_softmax tensor.
    # TODO: reduction="mean": a second, small kernel sums the losses of the rows that are
    #       not ignored and divides by how many there are (0.0 over none), writing a 0-d
    #       float32 tensor (torch.empty((), dtype=torch.float32, device=x.device)).
    raise NotImplementedError("TODO: cross_entropy")
