"""The block limit: a Triton tensor of more elements than one program can hold is refused.

One program of a Triton kernel keeps its blocks in registers. A multiprocessor of an
NVIDIA GPU has 65536 32-bit registers in all, so a block of more than 65536 values
cannot live in one program: the compiler spills it to local memory, and for the
one-program-per-row softmax of a 300007-column row (a 524288-wide block) it did not
finish compiling within 300 s on the H200 (docs/benchmarks.md, the block-limit table).

Every block shape goes through ``triton.language.core.validate_block_shape``: while a
kernel is compiled for the GPU, and while the CPU interpreter runs it. Wrapping it
refuses an oversized block at once, with the same words on both devices, before any
slow compile starts. The refusal is recorded here as well as raised, because Triton's
code generator re-wraps errors (``from None``) and the original exception is lost.

While ``@triton.autotune`` benchmarks its configs, a config that would spread a block
over so few threads that each holds more than ``MAX_PER_THREAD`` of its values is skipped
the same way, before it compiles: a thread has at most 255 registers, so such a config
spills, never wins, and is what made autotuning slow (on the H200 a 32768-wide block took
12.2 s to compile on 1 warp and 3.5 s on 2, against 0.4 s on 8: docs/experiments/
autotune_cost.py). Outside autotuning the config is the student's choice and compiles.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

MAX_BLOCK_ELEMENTS = 65536
MAX_PER_THREAD = 256  # values of one block per thread, for a config the autotuner tries
WARP_SIZE = 32
DEFAULT_WARPS = 4  # Triton's num_warps when a launch gives none


class BlockTooLarge(ValueError):
    """Raised inside Triton when a kernel asks for a block above the limit."""


class ConfigTooWide(ValueError):
    """Raised inside Triton when a config being autotuned would hold too much per thread."""


@dataclass
class Refusal:
    numel: int
    shape: tuple[int, ...]
    kernel: str  # the kernel being compiled or interpreted, where known
    num_warps: int | None


_state = threading.local()


def current_launch() -> tuple[str, int | None]:
    return getattr(_state, "launch", ("", None))


def set_launch(kernel: str, num_warps: int | None) -> None:
    """Called by the launch counter: which kernel the next block shapes belong to."""
    _state.launch = (kernel, num_warps)


class autotuning:
    """Context manager: the autotuner is trying a config (too-wide configs are skipped)."""

    def __enter__(self):
        _state.autotuning = getattr(_state, "autotuning", 0) + 1
        _state.too_wide = False

    def __exit__(self, *exc):
        _state.autotuning -= 1
        return False


def take_too_wide() -> bool:
    """Whether the config just tried was skipped as too wide (and forget it)."""
    too_wide = getattr(_state, "too_wide", False)
    _state.too_wide = False
    return too_wide


def pending_refusal() -> Refusal | None:
    """The refusal recorded and not yet taken, left in place."""
    return getattr(_state, "refusal", None)


def take_refusal() -> Refusal | None:
    """The refusal recorded since the last call to this, if any."""
    refusal = getattr(_state, "refusal", None)
    _state.refusal = None
    return refusal


def install(limit: int = MAX_BLOCK_ELEMENTS) -> None:
    import triton.language.core as core

    original = core.validate_block_shape
    if getattr(original, "_graders_limited", False):
        return

    def validate_block_shape(shape):
        numel = original(shape)
        if numel > limit:
            kernel, num_warps = current_launch()
            dims = tuple(int(getattr(d, "value", d)) for d in shape)
            _state.refusal = Refusal(numel, dims, kernel, num_warps)
            raise BlockTooLarge(
                f"a block of {numel} elements ({' × '.join(map(str, dims))}) in one program "
                f"is over the grader's limit of {limit}")
        if getattr(_state, "autotuning", 0):
            threads = WARP_SIZE * (current_launch()[1] or DEFAULT_WARPS)
            if numel > MAX_PER_THREAD * threads:
                _state.too_wide = True
                raise ConfigTooWide(f"a block of {numel} elements over {threads} threads "
                                    f"holds more than {MAX_PER_THREAD} per thread")
        return numel

    validate_block_shape._graders_limited = True
    core.validate_block_shape = validate_block_shape


def describe(refusal: Refusal, limit: int = MAX_BLOCK_ELEMENTS) -> str:
    """The refusal in the course's words (the check adds its own hint)."""
    where = f" in kernel `{refusal.kernel}`" if refusal.kernel else ""
    warps = f", num_warps={refusal.num_warps}" if refusal.num_warps else ""
    shape = " × ".join(map(str, refusal.shape))
    return (f"asked for a block of {refusal.numel} elements ({shape}{warps}){where}: one program "
            f"holds at most {limit} (a GPU multiprocessor has 65536 registers in all), so the "
            "block was refused before compiling")
