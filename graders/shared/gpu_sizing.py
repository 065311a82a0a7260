"""How much of one GPU a slot and a runner get (issue 43): the standard library alone, so
that the server (through graders/service/worker_client.py), the worker and the isolation
all size from the same figures. docs/deploy.md writes the arithmetic out.

- ``slots_per_gpu``: how many slots grade on each GPU of a host, from its CPU cores (a
  grading compiles on each of its lanes at once, and runners are made beside it) and its
  GPU memory (each slot keeps runners alive, each with a CUDA context, and each checking
  runner needs room for its inputs);
- ``size_cap``: one runner's GPU memory cap, given the GPU and its slots;
- ``timing_cap`` and ``driver_limit``: the cap of the runner that times, and what the
  driver may report for a runner within its cap (graders/isolation/gpu_memory.py).

The figures marked "estimate" are to be measured on the H200 (docs/benchmarks.md).
"""

from __future__ import annotations

MIB = 1 << 20
GIB = 1 << 30

# what one runner's CUDA context (torch, Triton's modules) holds, as NVML counts it against
# its process: an estimate
CONTEXT_BYTES = 640 * MIB
# one timing's buffers (graders/runner/timing.py): up to KEEP_MAX_BYTES (8 GiB) of kept
# outputs, the input pool, the L2 flush and the copy's two buffers of the largest shape.
# Timing has the GPU alone (graders/isolation/pool.py GpuGate), so one reserve serves a GPU
MARGIN_FRACTION = 0.05  # of a GPU's memory never handed out: the driver's own, fragmentation
TIMING_RESERVE_BYTES = 12 * GIB
MIN_CAP_BYTES = 1 * GIB  # below this a GPU check's inputs and outputs may not fit
# a slot is sized on memory only if each of its checking runners gets at least this
SLOT_MIN_CAP_BYTES = 2 * GIB
# cores one slot keeps busy: its lanes compile at once, and its runners are made beside
# them (torch's imports, a CUDA context). A grading among others takes 2 lanes (about 3.3
# cores, graders/service/host_load.py), one alone 4. On an H100 host's 16 cores with the
# class mix (docs/benchmarks.md, issue 43, 2026-12-06): 6 slots 1,966-2,066 gradings an
# hour with the cores saturated (load 21-35), non-hostile p50 ~10 s and 21-28 of 44 over
# 10 s; 4 slots 1,877 an hour on a burst half as long, non-hostile p50 7.4 s, 4 of 22 over
# 10 s. So 4 cores a slot: 4 on 16 cores, nearly the throughput of 6 at half the wait
CORES_PER_SLOT = 4
MAX_SLOTS_PER_GPU = 8
LANES = 4  # a grading's runners on a GPU (graders/engine/plan.py default_lanes)
WARM = 2 * LANES + 1  # runners a slot keeps ready (graders/service/worker.py default_warm)


def runners_alive(lanes: int = LANES, warm: int = WARM) -> int:
    """The runners one slot holds at most: those kept ready and those of its grading."""
    return max(0, warm) + max(1, lanes)


def size_cap(total_bytes: int, slots: int, lanes: int = LANES, warm: int = WARM,
             context_bytes: int = CONTEXT_BYTES,
             timing_reserve_bytes: int = TIMING_RESERVE_BYTES,
             margin_fraction: float = MARGIN_FRACTION) -> int:
    """One runner's GPU memory cap in bytes, on a GPU of ``total_bytes`` shared by
    ``slots`` slots, each grading over ``lanes`` runners and keeping ``warm`` ready:

        usable   = total × (1 − margin)
        contexts = slots × (warm + lanes) × context        every runner alive holds one
        cap      = (usable − contexts − timing reserve) / (slots × lanes)

    at least MIN_CAP_BYTES (a GPU too small for its slots is overcommitted rather than
    refusing honest checks: ``slots_per_gpu`` keeps the slots to what the GPU holds)."""
    slots, lanes = max(1, slots), max(1, lanes)
    usable = int(total_bytes * (1.0 - margin_fraction))
    contexts = slots * runners_alive(lanes, warm) * context_bytes
    share = (usable - contexts - timing_reserve_bytes) // (slots * lanes)
    return max(MIN_CAP_BYTES, int(share))


def timing_cap(cap: int, timing_reserve_bytes: int = TIMING_RESERVE_BYTES) -> int:
    """The cap of the runner while it times: its own and the GPU's one timing reserve."""
    return cap + timing_reserve_bytes if cap else 0


def driver_limit(cap: int, context_bytes: int = CONTEXT_BYTES) -> int:
    """What the driver may report for a runner's processes within its cap: NVML counts the
    CUDA context against the process, torch's fraction does not."""
    return cap + context_bytes if cap else 0


def slots_by_memory(total_bytes: int, lanes: int = LANES, warm: int = WARM,
                    context_bytes: int = CONTEXT_BYTES,
                    timing_reserve_bytes: int = TIMING_RESERVE_BYTES,
                    margin_fraction: float = MARGIN_FRACTION,
                    min_cap_bytes: int = SLOT_MIN_CAP_BYTES) -> int:
    """The most slots a GPU of ``total_bytes`` holds with every checking runner given at
    least ``min_cap_bytes``: (usable − timing reserve) / (runners alive × context + lanes ×
    min cap), at least 1."""
    usable = int(total_bytes * (1.0 - margin_fraction)) - timing_reserve_bytes
    per_slot = runners_alive(lanes, warm) * context_bytes + max(1, lanes) * min_cap_bytes
    return max(1, usable // per_slot)


def slots_by_cores(cores: int, gpus: int, cores_per_slot: int = CORES_PER_SLOT) -> int:
    """The slots each of ``gpus`` GPUs gets from ``cores`` CPU cores: cores per GPU / cores
    per slot, at least 1."""
    return max(1, (max(1, cores) // max(1, gpus)) // max(1, cores_per_slot))


def slots_per_gpu(cores: int, gpus: int, gpu_total_bytes: int | None,
                  cores_per_slot: int = CORES_PER_SLOT,
                  max_slots: int = MAX_SLOTS_PER_GPU) -> int:
    """Slots per GPU for a host: the fewest of what its cores allow, what its GPU's memory
    allows (when known) and ``max_slots``; at least 1."""
    by_cores = slots_by_cores(cores, gpus, cores_per_slot)
    by_memory = slots_by_memory(gpu_total_bytes) if gpu_total_bytes else by_cores
    return max(1, min(by_cores, by_memory, max_slots))
