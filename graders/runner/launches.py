"""Counting Triton launches where every launch passes, on the GPU and under the interpreter.

A Triton kernel can be launched in several ways: ``kernel[grid](...)`` (``JITFunction.run``),
the compiled handle that ``kernel.warmup(...)`` or ``triton.compile`` returns
(``compiled[grid](...)``, the Triton tutorial's persistent softmax), through
``@triton.autotune`` and ``@triton.heuristics``, or from inside a
``torch.library.triton_op``. They all end in one place:

* on an NVIDIA GPU, the compiled kernel's launcher (``driver.active.launcher_cls``), which
  is handed the grid, the stream and every kernel argument;
* under ``TRITON_INTERPRET=1``, the interpreter's ``GridExecutor``, which runs the grid.

A CUDA graph's replay runs what its capture launched without passing the launcher again,
so a graph keeps the launches recorded while it was captured and each replay counts them.

So that is where launches are counted, with the tensors each one was given
(graders.runner.guard). The interpreter has no compiled handles and no driver: here
``warmup()`` returns a handle that launches through the interpreter
(``InterpretedKernel``), and ``graders.runner.interpreter_driver`` stands in for the
GPU driver, so a kernel written for the GPU runs the same way on the CPU.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from graders.runner import blocks, gpu_figures, gpu_gate, guard, kernel_facts

# What ``InterpretedKernel`` reports where no GPU compile could be made here (see
# graders.runner.gpu_figures, which gives the GPU's own figures): an occupancy computed from
# them (the tutorial's) comes out finite and positive.
STAND_IN_REGS = 32
STAND_IN_SHARED_BYTES = 1024


def _tensors_in(values) -> list[Any]:
    import torch

    found, stack = [], list(values)
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif hasattr(item, "base") and isinstance(getattr(item, "base"), torch.Tensor):
            found.append(item.base)  # a TensorDescriptor
    return found


def _name_kernels_for_blocks(cls) -> None:
    """Wrap ``cls.run`` (which compiles, interprets or launches) so that a block refused
    while it runs names its kernel and num_warps (graders.runner.blocks)."""
    original = cls.run
    if getattr(original, "_graders_named", False):
        return

    def run(self, *args, _original=original, **kwargs):
        fn = getattr(self, "fn", None)
        blocks.set_launch(getattr(fn, "__name__", ""), kwargs.get("num_warps"))
        return _original(self, *args, **kwargs)

    run._graders_named = True
    cls.run = run


def _skip_too_wide_autotune_configs() -> None:
    """``@triton.autotune`` tries each config in ``Autotuner._bench``: one whose block holds
    too much per thread is skipped there before it compiles, as Triton skips a config that
    runs out of resources (graders.runner.blocks); every other error still propagates.
    After each config's benchmark the GPU gate is given back (graders.runner.gpu_gate): a
    call holds it at most GPU_HOLD_S at a stretch, and many configs already compiled would
    otherwise be benchmarked in one holding."""
    from triton.runtime.autotuner import Autotuner

    original = Autotuner._bench
    if getattr(original, "_graders_skipping", False):
        return

    def _bench(self, *args, **kwargs):
        with blocks.autotuning():
            try:
                return original(self, *args, **kwargs)
            except Exception:
                if blocks.take_too_wide():
                    return [float("inf")] * 3
                raise
            finally:
                gpu_gate.release()

    _bench._graders_skipping = True
    Autotuner._bench = _bench


def _count_gpu_launches() -> None:
    from triton.runtime import driver

    launcher = driver.active.launcher_cls
    original = launcher.__call__
    if getattr(original, "_graders_counted", False):
        return

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):  # noqa: N803
        gpu_gate.acquire()  # given back if a compile came before this launch
        guard.record_launch(_tensors_in(args), stream)
        kernel_facts.note_launch(function, (gridX, gridY, gridZ))  # for the speed words
        return original(self, gridX, gridY, gridZ, stream, function, *args)

    __call__._graders_counted = True
    launcher.__call__ = __call__


def _count_graph_replays() -> None:
    """A CUDA graph's replay runs the Triton kernels captured into it without passing the
    launcher again: the graph keeps what its capture launched, and each replay counts it."""
    import torch

    graph = torch.cuda.CUDAGraph
    if getattr(graph.replay, "_graders_counted", False):
        return
    begin, end, replay = graph.capture_begin, graph.capture_end, graph.replay

    def capture_begin(self, *args, **kwargs):
        guard.begin_capture()
        return begin(self, *args, **kwargs)

    def capture_end(self, *args, **kwargs):
        try:
            return end(self, *args, **kwargs)
        finally:
            self._graders_launches = guard.end_capture()

    def counted_replay(self, *args, **kwargs):
        out = replay(self, *args, **kwargs)
        guard.record_replay(getattr(self, "_graders_launches", []))
        return out

    counted_replay._graders_counted = True
    graph.capture_begin, graph.capture_end, graph.replay = capture_begin, capture_end, counted_replay


class InterpretedKernel:
    """What ``warmup()`` returns under the interpreter: a handle shaped like Triton's
    ``CompiledKernel`` (``_init_handles``, ``n_regs``, ``metadata.shared``,
    ``handle[grid](*args)``) that launches through the interpreter. Its figures are the
    GPU compile's (graders.runner.gpu_figures), and ``_init_handles`` refuses what the
    GPU's refuses; the arguments a launch leaves out (constexprs given by name to
    ``warmup``) are taken from warmup's."""

    def __init__(self, fn, kwargs: dict[str, Any], figures: gpu_figures.Figures | None = None):
        self.fn = fn
        self.name = fn.__name__
        self.figures = figures
        self.defaults = {k: v for k, v in kwargs.items() if k in fn.arg_names}
        self.n_regs = figures.n_regs if figures else STAND_IN_REGS
        self.n_spills = figures.n_spills if figures else 0
        self.n_max_threads = figures.n_max_threads if figures else 1024
        self.metadata = SimpleNamespace(
            name=self.name,
            num_warps=figures.num_warps if figures else kwargs.get("num_warps", 4),
            num_stages=figures.num_stages if figures else kwargs.get("num_stages", 3),
            num_ctas=1, shared=figures.shared if figures else STAND_IN_SHARED_BYTES)

    def _init_handles(self) -> None:
        """Nothing to load under the interpreter: what the GPU's loading refuses, refused."""
        gpu_figures.check(self.figures)

    def __getitem__(self, grid):
        def runner(*args, stream=None):
            bound = dict(zip(self.fn.arg_names, args))
            for name, value in self.defaults.items():
                bound.setdefault(name, value)
            return self.fn.run(grid=grid, warmup=False, **bound)

        return runner


def _interpreter() -> None:
    from triton.runtime import interpreter

    executor = interpreter.GridExecutor
    if not getattr(executor.__call__, "_graders_counted", False):
        original = executor.__call__

        def __call__(self, *args_dev, **kwargs):
            gpu_gate.acquire()  # as on the GPU (given back after an autotune benchmark)
            guard.record_launch(_tensors_in(list(args_dev) + list(kwargs.values())))
            with guard.launch_machinery():  # the interpreter converts tensors: allowed
                return original(self, *args_dev, **kwargs)

        __call__._graders_counted = True
        executor.__call__ = __call__

    def warmup(self, *args, grid=None, **kwargs):
        return InterpretedKernel(self, kwargs, gpu_figures.figures(self, args, kwargs))

    interpreter.InterpretedFunction.warmup = warmup
    _refuse_what_the_gpu_refuses(interpreter.InterpretedFunction)

    from triton.runtime import driver

    from graders.runner.interpreter_driver import InterpreterDriver

    driver.set_active(InterpreterDriver())


def _refuse_what_the_gpu_refuses(cls) -> None:
    """Each interpreted launch is compiled for the GPU first, and fails where the GPU's
    launch fails (out of shared memory, out of threads for its registers)."""
    original = cls.run
    if getattr(original, "_graders_gpu_checked", False):
        return

    def run(self, *args, grid, warmup, _original=original, **kwargs):
        if not warmup:  # shared memory, from a compile that serves every row length
            gpu_figures.check(gpu_figures.figures(self, args, kwargs, exact=False),
                              threads=False)
        return _original(self, *args, grid=grid, warmup=warmup, **kwargs)

    run._graders_gpu_checked = True
    cls.run = run


def install(device: str) -> None:
    """Count launches on ``device`` ("cuda" or "cpu", the interpreter)."""
    from triton.runtime import jit

    _name_kernels_for_blocks(jit.JITFunction)
    _skip_too_wide_autotune_configs()
    if device == "cuda":
        _count_gpu_launches()
        kernel_facts.install()
        _count_graph_replays()
        return
    from triton.runtime import interpreter

    _name_kernels_for_blocks(interpreter.InterpretedFunction)
    _interpreter()
