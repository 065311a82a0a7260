"""The compiled kernels behind a timed shape, in the course's words (issue 30).

The runner reports, for the first timed call of a shape, each Triton kernel it launched:
registers a thread, bytes spilled a thread, shared memory, warps, stages and the grid; and
the GPU's limits (graders/runner/kernel_facts.py). The submission runs in that process and
could have written any of it, so here every field is bounded and a malformed entry dropped,
and what comes out is words beside the score, never part of it.

From the facts: how many programs fit on one SM at once and what limits them (registers,
threads, shared memory or the SM's cap on blocks, by the rules of CUDA's occupancy
calculator), the occupancy that gives, and warnings with their fix when something holds the
kernel back: spilled registers, one program an SM, and, judged on the call's largest grid
(a small helper kernel of one program a row is no fault), under 4 elements a thread, fewer
programs than SMs, or fewer than half the places the GPU holds. The words name no exercise:
the engine grades any.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any

MAX_KERNELS = 16
REG_ALLOC_UNIT = 256       # registers are given to a warp in units of 256
REG_PARTITIONS = 4         # an SM's registers are split over 4 schedulers' partitions
SHARED_ALLOC_UNIT = 128    # shared memory is given to a block in units of 128 B
WARP = 32
FEW_A_THREAD = 4  # elements a thread under which a program's fixed costs dominate
# shared memory the hardware keeps per block from compute capability 8.0 on
BLOCK_RESERVED_SHARED = 1024
# resident blocks an SM allows, by compute capability (CUDA's occupancy table); unknown
# ones get the common 32, so that the cap is not named as a limit it is not
BLOCKS_PER_SM = {(7, 5): 16, (8, 6): 16, (8, 7): 16, (8, 9): 24}
DEFAULT_BLOCKS_PER_SM = 32
_NAME = re.compile(r"[^A-Za-z0-9_]")


def _int(value: Any, low: int, high: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


@dataclass(frozen=True)
class DeviceLimits:
    sms: int
    regs_per_sm: int
    threads_per_sm: int
    shared_per_sm: int
    blocks_per_sm: int
    reserved_shared: int = BLOCK_RESERVED_SHARED

    @classmethod
    def from_report(cls, raw: Any) -> "DeviceLimits | None":
        if not isinstance(raw, dict):
            return None
        sms = _int(raw.get("sms"), 1, 4096)
        regs = _int(raw.get("regs_per_sm"), 1024, 1 << 20)
        threads = _int(raw.get("threads_per_sm"), 32, 1 << 14)
        shared = _int(raw.get("shared_per_sm"), 0, 1 << 24)
        major, minor = _int(raw.get("major"), 1, 99), _int(raw.get("minor"), 0, 99)
        if None in (sms, regs, threads, shared, major, minor):
            return None
        return cls(sms, regs, threads, shared,
                   BLOCKS_PER_SM.get((major, minor), DEFAULT_BLOCKS_PER_SM),
                   BLOCK_RESERVED_SHARED if major >= 8 else 0)


@dataclass(frozen=True)
class KernelFacts:
    name: str
    grid: tuple[int, int, int]
    launches: int
    num_warps: int
    registers: int
    spill_bytes: int
    shared_bytes: int
    num_stages: int | None = None

    @classmethod
    def from_report(cls, raw: Any) -> "KernelFacts | None":
        if not isinstance(raw, dict):
            return None
        grid = raw.get("grid")
        if not isinstance(grid, list) or len(grid) != 3:
            return None
        dims = [_int(g, 1, 1 << 31) for g in grid]
        fields = [_int(raw.get("launches"), 1, 1 << 20), _int(raw.get("num_warps"), 1, 32),
                  _int(raw.get("registers"), 1, 255), _int(raw.get("spill_bytes"), 0, 1 << 24),
                  _int(raw.get("shared_bytes"), 0, 1 << 24)]
        if None in dims or None in fields or not isinstance(raw.get("name"), str):
            return None
        name = _NAME.sub("", raw["name"])[:64] or "kernel"
        return cls(name, tuple(dims), *fields, num_stages=_int(raw.get("num_stages"), 0, 16))

    @property
    def programs(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


def kernels_from_report(raw: Any) -> list[KernelFacts]:
    if not isinstance(raw, list):
        return []
    found = (KernelFacts.from_report(r) for r in raw[:MAX_KERNELS])
    return [k for k in found if k is not None]


def programs_per_sm(k: KernelFacts, dev: DeviceLimits) -> tuple[int, str]:
    """How many programs of ``k`` one SM holds at once, and what stops one more."""
    warp_regs = math.ceil(k.registers * WARP / REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    # whole warps per partition: a warp's registers never straddle two partitions
    warps_by_regs = dev.regs_per_sm // REG_PARTITIONS // warp_regs * REG_PARTITIONS
    limits = {  # in this order, so that a tie names the SM's own limits first
        "threads": dev.threads_per_sm // (WARP * k.num_warps),
        "the SM's cap on programs": dev.blocks_per_sm,
        "registers": warps_by_regs // k.num_warps,
    }
    if k.shared_bytes and dev.shared_per_sm:
        block = math.ceil((k.shared_bytes + dev.reserved_shared) / SHARED_ALLOC_UNIT)
        limits["shared memory"] = dev.shared_per_sm // (block * SHARED_ALLOC_UNIT)
    limiter = min(limits, key=lambda name: limits[name])
    return max(0, limits[limiter]), limiter


# what fills an SM with one program, as a sentence's subject, and what to change
ONE_AN_SM_SUBJECT = {"registers": "its registers leave", "threads": "its threads leave",
                     "shared memory": "its shared memory leaves",
                     "the SM's cap on programs": "the SM's cap on programs leaves"}
ONE_AN_SM_FIX = {
    "registers": "fewer registers a program (fewer values held a thread: a smaller block, "
                 "or the same block over more warps)",
    "shared memory": "less shared memory a program (fewer num_stages, smaller tiles)",
    "threads": "fewer threads a program (fewer num_warps, each doing more)",
    "the SM's cap on programs": "more work a program",
}


def _kernel_warnings(k: KernelFacts, per_sm: int, limiter: str) -> list[str]:
    out = []
    if k.spill_bytes:
        out.append(f"`{k.name}` spills {k.spill_bytes} B a thread to local memory: its "
                   f"{k.registers} registers a thread ran out, and every spilled value goes to "
                   "memory and back. Hold fewer values a thread: the same block over more "
                   "warps (num_warps), or a smaller block walked in a loop")
    if per_sm == 1:
        fix = ONE_AN_SM_FIX[limiter]
        out.append(f"`{k.name}`: {ONE_AN_SM_SUBJECT[limiter]} room for one program an SM at "
                   "a time, so while that program computes or waits, its SM has no other to "
                   f"switch to and reads nothing. {fix[0].upper() + fix[1:]} would let two "
                   "programs share an SM, one loading while the other computes")
    return out


def _grid_warnings(k: KernelFacts, dev: DeviceLimits, per_sm: int,
                   elements: int | None) -> list[str]:
    """About the call's largest grid: when even it leaves the GPU underused, or spreads the
    work so thin that each program's fixed costs outweigh it."""
    threads = k.programs * k.num_warps * WARP
    if elements and threads * FEW_A_THREAD > elements:
        per = float(f"{elements / threads:.2g}")
        return [f"`{k.name}` spread {elements} elements over {k.programs} programs of "
                f"{k.num_warps * WARP} threads, {per:g} {_plural(per, 'element')} a thread: "
                "each program's fixed costs (starting, its reductions and their barriers) "
                "outweigh the bytes it moves. Where you choose the grid, give each program "
                "more work: several rows a program"]
    places = per_sm * dev.sms
    if k.programs < dev.sms:
        return [f"`{k.name}` ran {k.programs} {_plural(k.programs, 'program')} for "
                f"{dev.sms} SMs: {dev.sms - k.programs} SMs had nothing to do. Split each "
                "program's work over several programs and combine their partial results"]
    if k.programs * 2 < places:  # under half of them
        return [f"`{k.name}` ran {k.programs} programs where the GPU holds {places} at once "
                f"({per_sm} an SM on {dev.sms} SMs): most places stayed empty, so too few "
                "loads were in flight to keep memory busy. More, smaller programs (each "
                "program's work split over several, their partial results combined) fill them"]
    return []


def kernel_words(raw_kernels: Any, raw_limits: Any, at_ceiling: bool,
                 elements: int | None = None) -> dict[str, Any]:
    """``{"kernels": [...], "warnings": [...]}`` for one shape, or {} when the runner
    reported nothing usable (the CPU, HIP, an old runner, a submission that wrote junk).
    No warnings for a shape at the copy ceiling: it has nothing to fix."""
    dev = DeviceLimits.from_report(raw_limits)
    kernels = kernels_from_report(raw_kernels)
    if dev is None or not kernels:
        return {}
    sized = [(k, *programs_per_sm(k, dev)) for k in kernels]
    listed, warnings = [], []
    for k, per_sm, limiter in sized:
        occupancy = per_sm * k.num_warps * WARP / dev.threads_per_sm
        listed.append({**asdict(k), "grid": list(k.grid), "programs": k.programs,
                       "programs_per_sm": per_sm, "limited_by": limiter,
                       "occupancy": round(occupancy, 3),
                       "text": describe(k, per_sm, limiter, occupancy)})
        if not at_ceiling:
            warnings += _kernel_warnings(k, per_sm, limiter)
    if not at_ceiling:
        largest, per_sm, _ = max(sized, key=lambda entry: entry[0].programs)
        warnings += _grid_warnings(largest, dev, per_sm, elements)
    return {"kernels": listed, "warnings": warnings}


def _plural(n: float, word: str) -> str:
    return word if n == 1 else word + "s"


def describe(k: KernelFacts, per_sm: int, limiter: str, occupancy: float) -> str:
    spilled = f"{k.spill_bytes} B spilled a thread" if k.spill_bytes else "no spills"
    shared = ("" if not k.shared_bytes else f", {k.shared_bytes} B shared"
              if k.shared_bytes < 1024 else f", {k.shared_bytes / 1024:.1f} KiB shared")
    stages = f", {k.num_stages} {_plural(k.num_stages, 'stage')}" if k.num_stages else ""
    times = f" ×{k.launches}" if k.launches > 1 else ""
    return (f"{k.name}{times}: {k.programs} {_plural(k.programs, 'program')} of {k.num_warps} "
            f"{_plural(k.num_warps, 'warp')}{stages}, {k.registers} registers a thread, "
            f"{spilled}{shared}; {per_sm} an SM ({limiter} the limit), "
            f"occupancy {occupancy * 100:.0f} %")
