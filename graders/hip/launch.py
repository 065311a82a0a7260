"""In the runner, on an NVIDIA GPU: compile the student's HIP file with CuPy's NVRTC and
turn each kernel into the Python entry point the exercise's checks call.

An entry point of the spec (``[hip.kernels.NAME]`` in ``spec.toml``) says:
* ``params``: the Python parameters, in order (``"mask=None"`` gives a default);
* ``kernel``: the kernel's arguments, each a param, an output, ``rows`` or ``cols`` (of
  the first param), typed ``name:float`` / ``name:int`` for scalars; a tensor param that
  is None is passed as a null pointer;
* ``outputs``: each output's shape, ``"like x"`` or ``"rows"`` (float32 [rows]);
* ``broadcast``: tensor params of shape [1, C] expanded to the first param's shape.
The kernel is launched with one block of ``block`` threads per row, on torch's current
stream, so the timer and the guard see it like a Triton launch.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable

from graders.hip import source as hip_source


class HipCompileError(Exception):
    def __init__(self, message: str, line: int | None, log: str):
        super().__init__(message)
        self.message, self.line, self.log = message, line, log


def compile_module(text: str, filename: str):
    """A CuPy RawModule, or HipCompileError naming the student's line."""
    os.environ.setdefault("CUPY_CACHE_IN_MEMORY", "1")  # no kernel cache shared on disk
    os.environ.setdefault("CUPY_CACHE_DIR", "/tmp/cupy")  # the sandbox's private /tmp
    import cupy

    module = cupy.RawModule(code=hip_source.prepare(text, filename),
                            options=("--std=c++17",), backend="nvrtc")
    try:
        module.compile()
    except cupy.cuda.compiler.CompileException as exc:
        log = exc.get_message() if hasattr(exc, "get_message") else str(exc)
        diagnostics = hip_source.parse_log(log, filename)
        first = hip_source.first_error(diagnostics)
        message = first.message if first else log.strip().splitlines()[0][:500]
        raise HipCompileError(f"HIP compile error: {message}", first.line if first else None,
                              log) from None
    return module


def load_kernels(torch, text: str, filename: str, kernels: dict[str, dict], block: int,
                 count_launch: Callable[[list], None],
                 note_kernel: Callable[[Any, tuple, dict], None] | None = None
                 ) -> dict[str, Callable]:
    """The entry points, as Python callables over torch tensors. ``note_kernel(key, grid,
    facts)`` hears of every launch with the compiled kernel's facts (for the speed words,
    graders/runner/kernel_facts.py)."""
    import numpy as np

    module = compile_module(text, filename)
    entry_points = {}
    for name, spec in kernels.items():
        try:
            function = module.get_function(name)
        except Exception as exc:  # noqa: BLE001 - cupy raises CUDADriverError for a missing name
            raise HipCompileError(f"your file defines no kernel `extern \"C\" __global__ void "
                                  f"{name}(...)` ({type(exc).__name__})", None, "") from None
        entry_points[name] = _adapter(torch, np, function, name, spec, block, count_launch,
                                      note_kernel)
    return entry_points


def compiled_facts(function, name: str, block: int) -> dict[str, Any]:
    """What the driver says of a loaded kernel (CuPy's RawKernel asks cuFuncGetAttribute),
    in the words Triton's facts use; a fact CuPy cannot give is None, and the checker then
    drops the entry."""
    def attribute(key: str) -> int | None:
        try:
            value = getattr(function, key)
        except Exception:  # noqa: BLE001 - an older CuPy, or a driver that will not say
            return None
        return value if isinstance(value, int) else None

    return {"name": name, "num_warps": block // 32, "num_stages": None,
            "registers": attribute("num_regs"), "spill_bytes": attribute("local_size_bytes"),
            "shared_bytes": attribute("shared_size_bytes")}


def _adapter(torch, np, function, name: str, spec: dict, block: int, count_launch,
             note_kernel=None):
    params = [p.split("=")[0] for p in spec["params"]]
    defaults = {p.split("=")[0]: _literal(p.split("=", 1)[1]) for p in spec["params"] if "=" in p}
    broadcast = set(spec.get("broadcast", []))
    known: dict[str, dict] = {}  # the kernel's compiled facts, asked for once

    def call(*args: Any, **kwargs: Any):
        import cupy

        values = dict(defaults)
        values.update(zip(params, args))
        values.update(kwargs)
        first = values[params[0]]
        rows, cols = int(first.shape[0]), int(first.shape[1])
        for p in params:
            v = values.get(p)
            if isinstance(v, torch.Tensor):
                if v.dtype != torch.float32:
                    raise TypeError(f"HIP kernels take float32; {p} is {v.dtype}")
                if p in broadcast and v.dim() == 2 and v.shape[0] == 1 and rows != 1:
                    v = v.expand(rows, cols)
                values[p] = v.contiguous()
        outputs = {}
        for out, shape in spec["outputs"].items():
            if shape == "rows":
                outputs[out] = torch.empty((rows,), dtype=torch.float32, device=first.device)
            else:  # "like <param>"
                outputs[out] = torch.empty_like(values[shape.split()[1]])
        values.update(outputs)
        values["rows"], values["cols"] = rows, cols
        kernel_args = []
        for item in spec["kernel"]:
            arg, _, kind = item.partition(":")
            v = values.get(arg)
            if kind == "float":
                kernel_args.append(np.float32(v))
            elif kind == "int" or arg in ("rows", "cols"):
                kernel_args.append(np.int32(int(v)))
            elif v is None:
                kernel_args.append(np.uint64(0))  # a null pointer (None would not be NULL)
            else:
                kernel_args.append(np.uint64(v.data_ptr()))
        if rows > 0 and cols > 0:
            with _stream(cupy, torch.cuda.current_stream().cuda_stream):
                function((rows,), (block,), tuple(kernel_args))
            count_launch([v for v in values.values() if isinstance(v, torch.Tensor)])
            if note_kernel is not None:  # the facts once, after the first launch loaded it
                if "facts" not in known:
                    known["facts"] = compiled_facts(function, name, block)
                note_kernel(("hip", name), (rows, 1, 1), known["facts"])
        result = tuple(outputs.values())
        return result[0] if len(result) == 1 else result

    call.__name__ = name
    return call


_STREAMS: dict[int, Any] = {}


def _stream(cupy, handle: int):
    """CuPy's view of torch's stream (one per handle). cupy 14 calls ExternalStream
    deprecated; its warning would land in the student's output, so it is silenced."""
    if handle not in _STREAMS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            _STREAMS[handle] = cupy.cuda.ExternalStream(handle)
    return _STREAMS[handle]


def _literal(text: str) -> Any:
    return {"None": None, "False": False, "True": True}.get(text.strip(), text.strip())
