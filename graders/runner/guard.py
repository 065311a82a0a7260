"""Keeps a call's work on the device and in Triton: what torch may do, and what it may not.

During one call of the submission's entry point:

* A ``TorchDispatchMode`` sees every aten op. Allocation, views, fills and same-device
  copies pass; anything that computes (exp, sum, max, softmax, arithmetic) is a
  violation, and so is a copy to another device or a read of a value into Python
  (``.item()``, ``float(t)``).
* The ways out of torch that no aten op sees (``.numpy()``, ``numpy.asarray(t)``,
  ``.tolist()``, DLPack, ``.cpu()``/``.to("cpu")``) are refused too, on the CPU exactly as
  on the GPU: a softmax done in numpy on the host is not a Triton kernel on either
  device. Triton's own interpreter converts tensors inside a launch; that is allowed.
* Launches are counted where every launch passes (graders.runner.launches), with the
  tensors each kernel was given. A result must be one of them (or a copy of one): a
  tensor no kernel of this call was handed was not written by the submission's kernels.

A violation is recorded as well as raised, so a student's ``try/except`` around the
call cannot hide it. None of this is a wall against a determined attacker sharing the
process; the checker judges every output against its own float64 reference, and the
guard keeps honest mistakes (torch math, host round trips) from passing as kernels.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

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
# copies: the result holds what the source held (a kernel's output stays one when copied)
COPY_OPS = frozenset({"clone", "copy_", "_to_copy", "contiguous"})
# aten ops that read a tensor's value into Python: the host, as far as the course goes
HOST_READ_OPS = frozenset({"_local_scalar_dense", "item"})

OFF_DEVICE = ("the work must be done in Triton kernels on the device, not in numpy or Python "
              "on the host; torch may only allocate, view and copy")


class TorchMathRejected(Exception):
    """Raised inside the submission when it asks torch to compute."""


class HostTransferRefused(TorchMathRejected):
    """Raised inside the submission when it takes a tensor's data out of torch."""


@dataclass
class Violation:
    op: str  # what was done: "aten.exp", or "Tensor.numpy()"
    line: int | None
    off_device: bool = False  # data taken off the device, rather than torch math

    def message(self) -> str:
        if self.off_device:
            return f"your code moved data off the device ({self.op}): {OFF_DEVICE}"
        return (f"torch computed part of the result ({self.op}): the work must be done in "
                "Triton kernels; torch may only allocate (torch.empty_like), view and copy")


@dataclass
class CallGuard:
    """Per-call bookkeeping: violations seen, Triton launches made, what they were given."""

    submission_path: str
    violations: list[Violation] = field(default_factory=list)
    launches: int = 0
    stream: int | None = None  # timed calls: the only stream kernels may be launched on
    foreign_streams: int = 0  # launches seen on any other stream
    # storages (by address) handed to a kernel launched in this call, and copies of them
    given: set[int] = field(default_factory=set)

    def student_line(self) -> int | None:
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.submission_path:
                return frame.f_lineno
            frame = frame.f_back
        return None

    def refuse(self, op: str, off_device: bool) -> None:
        violation = Violation(op=op, line=self.student_line(), off_device=off_device)
        self.violations.append(violation)
        raise (HostTransferRefused if off_device else TorchMathRejected)(violation.message())

    def written_by_a_kernel(self, tensor: torch.Tensor) -> bool:
        return storage_key(tensor) in self.given


def storage_key(tensor: torch.Tensor) -> int:
    """Which memory a tensor lives in: views and the tensor itself share the key."""
    try:
        return tensor.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001 - a tensor subclass without storage
        return -1


class NoTorchMath(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch would wrap __torch_dispatch__ in torch._disable_dynamo, whose first call
        # imports torch._dynamo (and sympy, torch.distributed, torch.onnx: 800 modules,
        # 1.1 s of CPU in every runner). The wrapping is done below instead, used only
        # once Dynamo is loaded: before that nothing can be tracing this frame.
        return False

    def __init__(self, guard: CallGuard, device: str):
        super().__init__()
        self.guard = guard
        self.device = device

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if func.namespace not in ("aten", "prim", "prims"):
            body = _python_custom_op(func)
            if body is None:  # an operator compiled into a library: it computes unseen
                self.guard.refuse(func.name(), off_device=False)
            # a Python custom operator (torch.library.triton_op, custom_op): its body runs
            # under this mode again, so what it launches counts and torch math in it is seen
            with self:
                return body(*args, **kwargs)
        if name in HOST_READ_OPS:
            self.guard.refuse("Tensor.item()", off_device=True)
        if name not in ALLOWED_OPS:
            self.guard.refuse(f"aten.{name}", off_device=False)
        if name in ("_to_copy", "copy_"):
            # a copy to another device (GPU -> CPU for numpy) leaves the kernel path
            devices = {t.device.type for t in _tensors(args, kwargs)}
            target = kwargs.get("device")
            if target is not None:
                devices.add(torch.device(target).type)
            if len(devices) > 1:
                self.guard.refuse(f"a copy to {'/'.join(sorted(devices))}", off_device=True)
        out = func(*args, **kwargs)
        if name in COPY_OPS:
            sources = list(_tensors(args[1:] if name == "copy_" else args, kwargs))
            if any(storage_key(t) in self.guard.given for t in sources):
                target = args[0] if name == "copy_" else out
                if isinstance(target, torch.Tensor):
                    self.guard.given.add(storage_key(target))
        return out


def _dynamo_disabled_once_loaded(dispatch):
    """``dispatch`` as torch's own wrapping would make it (Dynamo kept out of its frames),
    at the cost of importing Dynamo only where something else has imported it already."""
    disabled = torch._disable_dynamo(dispatch, recursive=True)  # imports on its first call

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if "torch._dynamo" in sys.modules:
            return disabled(self, func, types, args, kwargs)
        return dispatch(self, func, types, args, kwargs)

    __torch_dispatch__.__wrapped__ = dispatch
    return __torch_dispatch__


NoTorchMath.__torch_dispatch__ = _dynamo_disabled_once_loaded(
    NoTorchMath.__dict__["__torch_dispatch__"])


def _python_custom_op(func):
    """The Python body of an operator made with torch.library (custom_op, triton_op)."""
    try:
        from torch._library.custom_ops import OPDEFS
    except ImportError:  # pragma: no cover - a torch without Python custom operators
        return None
    opdef = OPDEFS.get(func.name().split(".")[0])
    return getattr(opdef, "_init_fn", None)


def _tensors(args, kwargs):
    stack = list(args) + list(kwargs.values())
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            yield item
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


_active: list[CallGuard] = []
_inside = threading.local()  # depth of Triton's own launch machinery (the interpreter's)


def active() -> CallGuard | None:
    return _active[-1] if _active else None


def inside_launch() -> bool:
    return getattr(_inside, "depth", 0) > 0


class launch_machinery:
    """Context manager: Triton's own code is running a launch (it may convert tensors)."""

    def __enter__(self):
        _inside.depth = getattr(_inside, "depth", 0) + 1

    def __exit__(self, *exc):
        _inside.depth -= 1
        return False


# CUDA graphs being captured: the launches recorded into each, so that a replay counts them
_capturing: list[list[set[int]]] = []


def record_launch(tensors=(), stream: int | None = None) -> None:
    """One kernel launched (Triton's, or a HIP kernel on the current stream), and the
    tensors it was given."""
    keys = {storage_key(t) for t in tensors if isinstance(t, torch.Tensor)}
    if _capturing:
        _capturing[-1].append(keys)
    state = active()
    if state is None:
        return
    state.launches += 1
    state.given |= keys
    if state.stream is not None:
        if stream is None:
            stream = torch.cuda.current_stream().cuda_stream
        if stream != state.stream:
            state.foreign_streams += 1


def begin_capture() -> None:
    _capturing.append([])


def end_capture() -> list[set[int]]:
    return _capturing.pop() if _capturing else []


def record_replay(launches: list[set[int]]) -> None:
    """A CUDA graph replayed: the kernels captured into it ran again, on the tensors they
    were given then."""
    for keys in launches:
        state = active()
        if state is None:
            return
        state.launches += 1
        state.given |= keys


# -- the ways out of torch that no aten op sees --------------------------------------------

def _to_cpu(args, kwargs) -> bool:
    """Whether ``Tensor.to(*args, **kwargs)`` names the CPU as its device."""
    try:
        device = torch._C._nn._parse_to(*args, **kwargs)[0]
    except Exception:  # noqa: BLE001 - let torch itself raise on nonsense
        return False
    return device is not None and torch.device(device).type == "cpu"


_OFF_DEVICE_METHODS = {
    # Tensor method: (what the student reads, when it is refused given the call's args)
    "numpy": ("Tensor.numpy()", None),
    "__array__": ("numpy.asarray(tensor)", None),
    "tolist": ("Tensor.tolist()", None),
    "__dlpack__": ("DLPack (numpy/CuPy from_dlpack)", None),
    "cpu": ("Tensor.cpu()", None),
    "to": ("Tensor.to('cpu')", _to_cpu),
}


def _refusing(method, what: str, only_if):
    def refusing(self, *args, **kwargs):
        state = active()
        if state is not None and not inside_launch() and (only_if is None or only_if(args, kwargs)):
            state.refuse(what, off_device=True)
        return method(self, *args, **kwargs)

    refusing._graders_refusing = True
    refusing.__name__ = getattr(method, "__name__", "method")
    return refusing


def install_off_device_refusals() -> None:
    """Refuse, during a guarded call, the ways a tensor's data leaves torch unseen."""
    for name, (what, only_if) in _OFF_DEVICE_METHODS.items():
        method = getattr(torch.Tensor, name)
        if not getattr(method, "_graders_refusing", False):
            setattr(torch.Tensor, name, _refusing(method, what, only_if))
    import torch.utils.dlpack as dlpack

    if not getattr(dlpack.to_dlpack, "_graders_refusing", False):
        original = dlpack.to_dlpack

        def to_dlpack(tensor, *args, **kwargs):
            state = active()
            if state is not None and not inside_launch():
                state.refuse("torch.utils.dlpack.to_dlpack", off_device=True)
            return original(tensor, *args, **kwargs)

        to_dlpack._graders_refusing = True
        dlpack.to_dlpack = to_dlpack
        torch.to_dlpack = to_dlpack


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
