"""What the GPU's compiler decides, known on the CPU (issue 41).

Under the interpreter a kernel is run, never compiled: it has no shared memory, no
registers, and nothing runs out of them. But the GPU's verdict depends on what the compiler
decides. The Triton tutorial's persistent softmax pipelines its row loop over
``num_stages=4``, which at 32768 float32 columns asks 393,248 bytes of shared memory of an
H200 that has 232,448 (``OutOfResources`` at the launch); its occupancy code divides by
``metadata.shared``, which is 0 for a 1-column block. The interpreter said neither.

So each launch the interpreter is about to run is also compiled for the graded GPU's
target (``sm_90``, Triton's own compiler and the ptxas in its wheel: no GPU, no driver and
no C compiler needed), once per specialisation (Triton's JIT cache, in this process), and:

* the launch raises the ``OutOfResources`` the GPU's launch raises, with the GPU's limits
  and Triton's own words (``CompiledKernel._init_handles``'s two checks: shared memory, and
  the threads the registers leave room for);
* ``warmup()``'s handle reports the compiled figures occupancy code reads: ``n_regs``,
  ``n_spills`` (Triton's: local memory a thread, in words), ``n_max_threads``,
  ``metadata.shared``, ``num_warps``. Registers and local memory come from the cubin
  (``cuobjdump -res-usage``, in Triton's wheel), as the driver reads them when it loads it.

Compiling inside an interpreting process takes care: ``triton.language``'s functions are
the interpreter's while it runs (``InterpretedFunction``, and Triton never restores the
language it patches), so for the length of a compile they are swapped for compilable
twins and the language is put back as it was when ``install()`` took its snapshot.
A kernel the compile cannot handle here (a helper reached through another module's
attributes, a tool missing) keeps the interpreter's stand-in figures: the CPU is then as
lenient as it was, never stricter than the GPU.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Iterator

from graders.runner.interpreter_driver import H200_PROPERTIES

WARP_SIZE = H200_PROPERTIES["warpSize"]
REGISTER_GRANULE = 8  # registers are allotted a thread in 8s
WARP_GRANULE = 4  # and warps a block in 4s, when registers bound the block
MAX_THREADS = 1024

_RESOURCES = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
_MISSING = object()


@dataclass(frozen=True)
class Figures:
    """A compiled kernel's resources, as a GPU's driver would report them."""
    shared: int
    n_regs: int
    n_spills: int  # words of local memory a thread (Triton's n_spills)
    num_warps: int
    num_stages: int

    @property
    def n_max_threads(self) -> int:
        """Threads a block may have with these registers (what the driver reports)."""
        if self.n_regs <= 0:
            return MAX_THREADS
        per_thread = -(-self.n_regs // REGISTER_GRANULE) * REGISTER_GRANULE
        warps = H200_PROPERTIES["max_num_regs"] // (per_thread * WARP_SIZE)
        warps -= warps % WARP_GRANULE
        return min(MAX_THREADS, warps * WARP_SIZE)


class _State:
    snapshot: list[tuple[Any, dict[str, Any]]] | None = None
    skipping = False  # the grader's own kernels (the known answer): nothing to learn
    twins: dict[tuple[int, bool], tuple[Any, Any]] = {}
    by_hash: dict[str, tuple[int, int]] = {}
    last_failure = ""  # why the last compile here could not be made (for the tests)


def install() -> None:
    """Remember ``triton.language`` as it is before anything is interpreted (after the
    grader's own wrappers, graders.runner.blocks, so that compiles keep its block limit)."""
    import triton.language as tl
    import triton.language.core as core
    import triton.language.math as math

    namespaces = [tl, core, math, core.tensor, core.tensor_descriptor_base]
    _State.snapshot = [(ns, dict(vars(ns))) for ns in namespaces]


@contextlib.contextmanager
def skipped() -> Iterator[None]:
    """Launches of the grader's own kernels interpreted without the GPU's compile: the
    known answer's figures judge nothing, and their compile cost every CPU runner ~0.8 s of
    its start (a runner starts for every grading)."""
    _State.skipping = True
    try:
        yield
    finally:
        _State.skipping = False


def _twin(fn, exact: bool):
    """A compilable ``JITFunction`` of an ``InterpretedFunction`` (kept: its JIT cache holds
    the compiled specialisations). ``exact``: specialised as the GPU's launch would be (on
    a row length divisible by 16, a pointer's alignment), for the figures occupancy code
    reads (registers differ by specialisation: 14 or 17 for a 1-column float16 block).
    Otherwise not, for the shared memory a launch needs, which the values of ints and
    pointers do not change (393,248 bytes either way for the tutorial's 4-stage 32768
    float32 block): one compile then serves every row length a grading sends (the
    reference's 40 launches, 40 compiles, 6.2 s, became 12 compiles, 2.8 s)."""
    from triton.runtime.jit import JITFunction

    kept = _State.twins.get((id(fn), exact))
    if kept is None:
        options = dict(fn.kwargs)
        if not exact:
            values = [p.name for p in JITFunction(fn.fn).params if not p.is_constexpr]
            options.update(do_not_specialize=values, do_not_specialize_on_alignment=values)
        kept = _State.twins[(id(fn), exact)] = (fn, JITFunction(fn.fn, **options))
    return kept[1]


@contextlib.contextmanager
def _compiling(extra_globals: list[dict[str, Any]]) -> Iterator[None]:
    """Triton set to compile, not interpret, for the length of the block."""
    from triton import knobs
    from triton.runtime.interpreter import InterpretedFunction

    swapped: list[tuple[dict[str, Any], str, Any]] = []
    restored: list[tuple[Any, str, Any]] = []
    interpreting = knobs.runtime.interpret
    knobs.runtime.interpret = False
    try:
        for namespace, saved in _State.snapshot or []:
            now = vars(namespace)
            for name in set(now) | set(saved):
                if now.get(name, _MISSING) is not saved.get(name, _MISSING):
                    restored.append((namespace, name, now.get(name, _MISSING)))
                    if name in saved:
                        setattr(namespace, name, saved[name])
                    else:
                        delattr(namespace, name)
        modules = [vars(m) for n, m in list(sys.modules.items())
                   if m is not None and n.startswith("triton.language")]
        for namespace in modules + extra_globals:
            for name, value in list(namespace.items()):
                if isinstance(value, InterpretedFunction):
                    swapped.append((namespace, name, value))
                    namespace[name] = _twin(value, exact=True)
        yield
    finally:
        for namespace, name, value in swapped:
            namespace[name] = value
        for namespace, name, value in reversed(restored):
            if value is _MISSING:
                delattr(namespace, name)
            else:
                setattr(namespace, name, value)
        knobs.runtime.interpret = interpreting


@contextlib.contextmanager
def _to_shared_memory_only() -> Iterator[None]:
    """Compile through Triton's passes only as far as its LLVM IR, where the shared memory a
    launch needs is settled (the NVIDIA backend's ``make_llir`` sets ``metadata["shared"]``):
    the PTX and cubin stages, LLVM's code generation and ptxas, are replaced by stand-ins
    through Triton's own ``add_stages_inspection_hook``. They were most of each compile
    (27 compiles, 2.5 s of a 5 s CPU grading of the reference). The stand-ins' kernels are
    cached apart (their own cache folder), so a full compile never finds one."""
    from triton import knobs

    def stages_hook(backend, stages, options, language, capability):
        def name_only(src, metadata):  # the kernel's name, as make_ptx would find it
            found = re.search(r"define[^@\n]*@([A-Za-z_][A-Za-z0-9_]*)\(", str(src))
            metadata["name"] = found.group(1) if found else "kernel"
            return ""

        stages["ptx"] = name_only
        stages["cubin"] = lambda src, metadata: b""

    hook, cache = knobs.runtime.add_stages_inspection_hook, knobs.cache.dir
    knobs.runtime.add_stages_inspection_hook = stages_hook
    knobs.cache.dir = os.path.join(cache or tempfile.gettempdir(), "graders-shared-memory-only")
    try:
        yield
    finally:
        knobs.runtime.add_stages_inspection_hook, knobs.cache.dir = hook, cache


def _cuobjdump() -> str:
    import triton

    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                        "cuobjdump")


def _registers_and_spills(compiled) -> tuple[int, int]:
    """(registers a thread, local memory a thread in words) from the cubin."""
    known = _State.by_hash.get(compiled.hash)
    if known is None:
        with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
            cubin.write(compiled.asm["cubin"])
            cubin.flush()
            out = subprocess.run([_cuobjdump(), "-res-usage", cubin.name], check=True,
                                 capture_output=True, text=True, timeout=60).stdout
        found = _RESOURCES.search(out)
        regs, stack, _, local = (int(g) for g in found.groups()) if found else (0, 0, 0, 0)
        known = _State.by_hash[compiled.hash] = (regs, (stack + local) // 4)
    return known


def figures(fn, args: tuple, kwargs: dict[str, Any], exact: bool = True) -> Figures | None:
    """The GPU's figures for launching interpreted kernel ``fn`` with these arguments (as
    its ``run`` gets them); None where the compile cannot be made here. A block the grader
    refuses (graders.runner.blocks) fails the compile as it fails the GPU's, the refusal
    kept for the check's words; any other compile that fails here leaves the launch to the
    interpreter and its stand-in figures, as before."""
    if _State.snapshot is None or _State.skipping:
        return None
    from graders.runner import blocks, guard

    refused_before = blocks.pending_refusal()
    try:
        with _compiling([fn.fn.__globals__]), guard.launch_machinery(), \
                (contextlib.nullcontext() if exact else _to_shared_memory_only()):
            compiled = _twin(fn, exact).warmup(*args, grid=(1,), **kwargs)
        # registers only where they are read (exact figures, for occupancy code); a launch's
        # own check is of shared memory, which the compile knows before PTX
        regs, spills = _registers_and_spills(compiled) if exact else (0, 0)
    except Exception as exc:
        if blocks.pending_refusal() not in (None, refused_before):
            raise  # the GPU's compile is refused too, in the same words
        _State.last_failure = f"{type(exc).__name__}: {exc}"[:300]
        return None
    meta = compiled.metadata
    return Figures(int(meta.shared), regs, spills, int(meta.num_warps), int(meta.num_stages))


def check(found: Figures | None, threads: bool = True) -> None:
    """What the GPU's launch refuses (``CompiledKernel._init_handles``), with its limits:
    shared memory, then (``threads``, from exact figures) the threads its registers leave
    room for, which ptxas keeps within the kernel's warps (it compiles for them)."""
    if found is None:
        return
    from triton.runtime.errors import OutOfResources

    if found.shared > H200_PROPERTIES["max_shared_mem"]:
        raise OutOfResources(found.shared, H200_PROPERTIES["max_shared_mem"], "shared memory")
    if threads and found.num_warps * WARP_SIZE > found.n_max_threads:
        raise OutOfResources(found.num_warps * WARP_SIZE, found.n_max_threads, "threads")
