"""What Triton compiled and launched during one timed call, as the runner saw it (issue 30).

For the checker's speed words: each kernel's registers a thread, bytes spilled a thread,
shared memory, warps and stages, and the grid it ran. For Triton they come from the
compiled kernel (``CompiledKernel._init_handles`` loads the binary and learns registers and
spills from the driver) and from the launcher (graders.runner.launches, which sees every
launch's grid and function handle); for HIP, from the adapter that launches the student's
kernel (graders.hip.launch, the driver's attributes of the loaded function). Informative
only: the checker bounds them, words them and never scores them
(graders/engine/kernel_words.py), because the submission runs in this process and could have
written any of these numbers itself.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

MAX_KERNELS = 16  # distinct (kernel, grid) pairs reported for one call; more are dropped

# a kernel's facts, by the driver's function handle (Triton) or ("hip", its name)
_compiled: dict[Any, dict[str, Any]] = {}
_state = threading.local()


def install() -> None:
    """Learn each compiled kernel's facts when its binary is loaded (GPU only)."""
    from triton.compiler.compiler import CompiledKernel

    original = CompiledKernel._init_handles
    if getattr(original, "_graders_facts", False):
        return

    def _init_handles(self):
        original(self)
        function = getattr(self, "function", None)
        if isinstance(function, int) and function not in _compiled:
            meta = self.metadata
            # Triton's n_spills is the driver's local memory a thread divided by 4 (words,
            # not bytes); local memory is where spilled registers go
            words = getattr(self, "n_spills", None)
            _compiled[function] = {
                "name": str(getattr(self, "name", "")),
                "num_warps": getattr(meta, "num_warps", None),
                "num_stages": getattr(meta, "num_stages", None),
                "registers": getattr(self, "n_regs", None),
                "spill_bytes": 4 * words if isinstance(words, int) else None,
                "shared_bytes": getattr(meta, "shared", None),
            }

    _init_handles._graders_facts = True
    CompiledKernel._init_handles = _init_handles


def note_launch(function: Any, grid: tuple[int, int, int],
                facts: dict[str, Any] | None = None) -> None:
    """Called for every launch: by Triton's launcher (``function`` the driver's handle, its
    facts learnt when it loaded) or by the HIP adapter (a key of its own, with the facts).
    Kept only while a call is being watched."""
    seen = getattr(_state, "seen", None)
    if seen is not None:
        if facts is not None:
            _compiled.setdefault(function, facts)
        seen.append((function, tuple(int(g) for g in grid)))


@contextmanager
def watching(enabled: bool = True) -> Iterator[list[dict[str, Any]]]:
    """Collect the launches made inside the block; the list yielded is filled on exit with
    one entry per distinct (kernel, grid), its facts and how many launches it made."""
    report: list[dict[str, Any]] = []
    if not enabled:
        yield report
        return
    _state.seen = []
    try:
        yield report
    finally:
        seen, _state.seen = _state.seen, None
        report.extend(summarise(seen))


def summarise(seen: list[tuple[Any, tuple[int, int, int]]]) -> list[dict[str, Any]]:
    counts: dict[tuple[Any, tuple[int, int, int]], int] = {}
    for key in seen:
        counts[key] = counts.get(key, 0) + 1
    out = []
    for (function, grid), launches in list(counts.items())[:MAX_KERNELS]:
        facts = _compiled.get(function)
        out.append({**(facts or {"name": ""}), "grid": list(grid), "launches": launches})
    return out


def device_limits(props) -> dict[str, int]:
    """What bounds programs an SM on this GPU, from torch's device properties."""
    return {
        "sms": int(props.multi_processor_count),
        "regs_per_sm": int(getattr(props, "regs_per_multiprocessor", 65536)),
        "threads_per_sm": int(getattr(props, "max_threads_per_multi_processor", 2048)),
        "shared_per_sm": int(getattr(props, "shared_memory_per_multiprocessor", 0)),
        "major": int(props.major),
        "minor": int(props.minor),
    }
