"""Keeps torch from computing the result: only allocation and shape ops may run.

A ``TorchDispatchMode`` sees every aten op the submission's entry point runs.
Allocation, views, copies and fills pass; anything that computes (exp, sum,
max, softmax, arithmetic) is recorded as a violation and raised. The record
survives a student ``try/except`` around the call. A launch counter wrapped
around Triton's launch path proves that a kernel ran at all.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import blocks

# aten overload packets that cannot compute a softmax: memory and metadata only
ALLOWED_OPS = frozenset({
    # allocation and fills
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
    "zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like",
    "new_full", "fill_", "zero_", "scalar_tensor",
    # views and layout
    "view", "_unsafe_view", "reshape", "_reshape_alias", "alias", "as_strided", "expand",
    "expand_as", "t", "transpose", "permute", "squeeze", "unsqueeze", "select", "slice",
    "narrow", "split", "split_with_sizes", "chunk", "unbind", "flatten", "unflatten",
    "view_as", "detach", "set_", "resize_", "lift_fresh", "resolve_conj", "resolve_neg",
    # copies (same device only, checked below)
    "clone", "copy_", "_to_copy", "contiguous", "record_stream",
})


class TorchMathRejected(Exception):
    """Raised inside the submission when it asks torch to compute."""


@dataclass
class Violation:
    op: str
    line: int | None


@dataclass
class CallGuard:
    """Per-call bookkeeping: violations seen and Triton launches made."""

    submission_path: str
    violations: list[Violation] = field(default_factory=list)
    launches: int = 0
    stream: int | None = None  # timed calls: the only stream kernels may be launched on
    foreign_streams: int = 0  # launches seen on any other stream

    def student_line(self) -> int | None:
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.submission_path:
                return frame.f_lineno
            frame = frame.f_back
        return None


class NoTorchMath(TorchDispatchMode):
    def __init__(self, guard: CallGuard, device: str):
        super().__init__()
        self.guard = guard
        self.device = device

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        allowed = name in ALLOWED_OPS
        if allowed and name in ("_to_copy", "copy_"):
            # a copy to another device (e.g. GPU -> CPU for numpy) leaves the kernel path
            devices = {t.device.type for t in _tensors(args, kwargs)}
            target = kwargs.get("device")
            if target is not None:
                devices.add(torch.device(target).type)
            allowed = len(devices) <= 1
        if not allowed:
            line = self.guard.student_line()
            self.guard.violations.append(Violation(op=f"aten.{name}", line=line))
            raise TorchMathRejected(
                f"torch computed `{name}`: the work must be done in Triton kernels "
                "(torch may only allocate, view and copy)"
            )
        return func(*args, **kwargs)


def _tensors(args, kwargs):
    stack = list(args) + list(kwargs.values())
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            yield item
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


_active: list[CallGuard] = []


def install_launch_counter() -> None:
    """Wrap Triton's launch entry points (compiled and interpreted) to count launches."""
    from triton.runtime import jit

    classes = [jit.JITFunction]
    try:
        from triton.runtime import interpreter

        classes.append(interpreter.InterpretedFunction)
    except ImportError:  # pragma: no cover - triton without an interpreter
        pass
    for cls in classes:
        original = cls.run
        if getattr(original, "_graders_counted", False):
            continue

        def run(self, *args, _original=original, **kwargs):
            # which kernel any block shape seen next belongs to (graders.runner.blocks)
            fn = getattr(self, "fn", None)
            blocks.set_launch(getattr(fn, "__name__", ""), kwargs.get("num_warps"))
            if not kwargs.get("warmup", False) and _active:
                state = _active[-1]
                state.launches += 1
                if state.stream is not None and \
                        torch.cuda.current_stream().cuda_stream != state.stream:
                    state.foreign_streams += 1
            return _original(self, *args, **kwargs)

        run._graders_counted = True
        cls.run = run


def record_launch() -> None:
    """A kernel launched outside Triton (a HIP kernel, on the current stream): counted."""
    if _active:
        _active[-1].launches += 1


class guarded_call:
    """Context manager: count launches and forbid torch math for one call."""

    def __init__(self, guard: CallGuard, device: str):
        self.guard = guard
        self.mode = NoTorchMath(guard, device)

    def __enter__(self):
        _active.append(self.guard)
        self.mode.__enter__()
        return self.guard

    def __exit__(self, *exc):
        try:
            self.mode.__exit__(*exc)
        finally:
            _active.pop()
        return False
