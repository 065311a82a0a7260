"""Slots per GPU sized from the host (issue 43), where SLOTS_PER_GPU does not say.

The host's side only: how many CPU cores this process may use and how much memory its GPUs
have (nvidia-smi, no torch). The arithmetic is the graders' own
(graders.service.worker_client ``slots_per_gpu``, from graders/shared/gpu_sizing.py), the
same figures each slot's worker sizes its runners' GPU memory caps from; docs/deploy.md
writes it out. An explicit SLOTS_PER_GPU always wins (server/grading/local_pool.py).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess

from graders.service.worker_client import slots_per_gpu

log = logging.getLogger("server.slots")
MIB = 1 << 20


def cpu_cores() -> int:
    """The CPU cores this process may run on (its affinity: a container's share, not the
    host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def gpu_memory_bytes(indices: list[int]) -> int | None:
    """The smallest memory of the GPUs ``indices`` as the driver reports it; None without
    nvidia-smi or an answer for each."""
    smi = shutil.which("nvidia-smi")
    if smi is None or not indices:
        return None
    sizes = []
    for index in indices:
        try:
            out = subprocess.run([smi, f"--id={index}", "--query-gpu=memory.total",
                                  "--format=csv,noheader,nounits"], capture_output=True,
                                 text=True, timeout=20)
            sizes.append(int(out.stdout.strip().splitlines()[0]) * MIB)
        except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
            return None
    return min(sizes)


def sized_slots_per_gpu(gpus: list[int], cores: int | None = None,
                        gpu_bytes: int | None = None) -> int:
    """Slots per GPU for this host's ``gpus`` (the indices graded on): from its cores and
    its GPUs' memory, each read here unless given."""
    cores = cores if cores is not None else cpu_cores()
    gpu_bytes = gpu_bytes if gpu_bytes is not None else gpu_memory_bytes(gpus)
    per_gpu = slots_per_gpu(cores, max(1, len(gpus)), gpu_bytes)
    log.info("SLOTS_PER_GPU not set: %d slots on each of %d GPUs, sized from %d CPU cores "
             "and %s of GPU memory (docs/deploy.md)", per_gpu, len(gpus), cores,
             f"{gpu_bytes / (1 << 30):.0f} GiB" if gpu_bytes else "an unknown amount")
    return per_gpu
