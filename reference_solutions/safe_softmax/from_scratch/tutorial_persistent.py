# expect: long_rows (only) — a persistent grid sized from the device's properties and the compiled
# kernel's registers and shared memory (warmup(), then a launch on the compiled handle), each
# program looping over rows held whole in one block: right on every row of up to 32768 columns
# the checks send, refused on the longer ones (a block over 65536 elements)
#
# Written from scratch, not from the reference: the design of Triton's fused-softmax
# tutorial (persistent programs, a compiled handle launched directly, one block per row),
# with 2 pipeline stages where the tutorial takes 4 on large-shared-memory GPUs (with 4, the
# H200 and the CPU also fail poisoned_row's 32768-column rows, out of shared memory:
# tutorial_four_stages.py).
"""Safe softmax in the style of Triton's fused-softmax tutorial: persistent programs.

The host code compiles the kernel once with ``warmup()`` (without launching it), reads how
many registers and how much shared memory the compiled kernel needs, and from the GPU's
register file and shared memory works out how many programs fit on one multiprocessor at
once. It launches exactly that many programs per multiprocessor (a persistent grid), and
each program walks the rows ``pid, pid + num_programs, ...``. The launch goes through the
compiled handle (``kernel[grid](...)`` on what ``warmup`` returned), skipping the JIT's
argument binding on every call.

The math is right: the max is subtracted, padding lanes load as -inf, the store is masked.
The limit is the design: a whole row lives in one block of next_power_of_2(n_cols) lanes,
so a row over 65536 columns asks for more than one program may hold.
"""

import torch
import triton
import triton.language as tl
from triton.runtime import driver

DEVICE = driver.active.get_active_torch_device()
PROPERTIES = driver.active.utils.get_device_properties(DEVICE.index)
NUM_SM = PROPERTIES["multiprocessor_count"]
NUM_REGS = PROPERTIES["max_num_regs"]          # 32-bit registers per multiprocessor
SIZE_SMEM = PROPERTIES["max_shared_mem"]       # bytes of shared memory per multiprocessor
WARP_SIZE = PROPERTIES["warpSize"]


@triton.jit
def _softmax_persistent(y_ptr, x_ptr, x_row_stride, y_row_stride, n_rows, n_cols,
                        BLOCK_SIZE: tl.constexpr, NUM_STAGES: tl.constexpr):
    first = tl.program_id(0)
    step = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_SIZE)
    in_row = cols < n_cols
    # each persistent program takes every step-th row; the loads of the next rows are
    # pipelined over NUM_STAGES iterations on a GPU
    for row in tl.range(first, n_rows, step, num_stages=NUM_STAGES):
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=in_row, other=float("-inf"))
        x = x.to(tl.float32)
        shifted = x - tl.max(x, axis=0)      # every exponent <= 0: exp cannot overflow
        numerator = tl.exp(shifted)
        y = numerator / tl.sum(numerator, axis=0)
        tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=in_row)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    num_warps = 8
    # The tutorial pipelines 4 rows ahead where shared memory exceeds 200 KB: on an H200
    # that asks 393,248 bytes of shared memory for a 32768-column block (3 rows in flight),
    # over the 232,448 it has, and the launch raises OutOfResources (on the CPU too: it
    # compiles each launch for the GPU). 2 stages hold one row in flight, which fits.
    num_stages = 2
    y = torch.empty_like(x)
    # compile (no launch) to learn the kernel's registers and shared memory
    kernel = _softmax_persistent.warmup(y, x, x.stride(0), y.stride(0), n_rows, n_cols,
                                        BLOCK_SIZE=BLOCK_SIZE, NUM_STAGES=num_stages,
                                        num_warps=num_warps, grid=(1,))
    kernel._init_handles()
    # programs resident per multiprocessor: limited by registers and by shared memory
    occupancy = NUM_REGS // (kernel.n_regs * WARP_SIZE * num_warps)
    if kernel.metadata.shared:
        occupancy = min(occupancy, SIZE_SMEM // kernel.metadata.shared)
    num_programs = min(NUM_SM * max(occupancy, 1), n_rows)
    kernel[(num_programs, 1, 1)](y, x, x.stride(0), y.stride(0), n_rows, n_cols,
                                 BLOCK_SIZE, num_stages)
    return y
