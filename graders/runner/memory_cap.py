"""The runner's own GPU memory cap (issue 43), set before its first allocation.

The launcher passes the cap in bytes (``graders.shared.protocol.GPU_MEMORY_CAP_ENV``;
graders/isolation/gpu_memory.py sizes it). The runner sets torch's per-process fraction to
it as its first GPU work (``known_answer``, inside the GPU gate), so that an allocation past
it raises torch's out-of-memory error in this process alone: the job fails `memory_limit`,
and the jobs beside it on the GPU keep their memory. The submission runs in this process
and could lift the fraction, and allocations outside torch's allocator are not counted:
the trusted side holds the job to its cap by what the driver reports
(graders/isolation/launch.py), and to what this process says torch reserved at its peak
(``peak``, reported after each call: a figure above the cap is the job's own admission).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from graders.shared.protocol import GPU_MEMORY_CAP_ENV


def cap_from_env(environ: Mapping[str, str] = os.environ) -> int:
    """The cap in bytes the launcher gave; 0 for none (or a value that is not one)."""
    try:
        return max(0, int(environ.get(GPU_MEMORY_CAP_ENV, "0")))
    except ValueError:
        return 0


def fraction(cap: int, total: int) -> float:
    """torch's per-process fraction for a cap of ``cap`` bytes on a GPU of ``total``: at most
    the whole GPU."""
    return 1.0 if cap <= 0 or total <= 0 else min(1.0, cap / total)


class MemoryCap:
    """The fraction of one runner, on its one GPU (device 0: it sees no other)."""

    def __init__(self, torch, cap: int):
        self.torch, self.base, self.cap = torch, cap, 0
        self.total = 0

    def install(self, cap: int | None = None) -> dict[str, Any]:
        """Set the fraction for ``cap`` (the launcher's, by default). What it set, for the
        checker's log."""
        cap = self.base if cap is None else cap
        if cap <= 0:
            return {}
        cuda = self.torch.cuda
        if not self.total:
            self.total = int(cuda.get_device_properties(0).total_memory)
        cuda.set_per_process_memory_fraction(fraction(cap, self.total), 0)
        self.cap = cap
        return {"cap": cap, "total": self.total}

    def reset_peak(self) -> None:
        if self.cap:
            self.torch.cuda.reset_peak_memory_stats(0)

    def peak(self) -> int | None:
        """What torch's allocator reserved at most since ``reset_peak``."""
        return int(self.torch.cuda.max_memory_reserved(0)) if self.cap else None
