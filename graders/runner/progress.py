"""What the runner is doing, told to the checker while a call is still in flight.

Between a request and its reply the runner may send progress frames: a Triton
compile starting (kernel, constexprs, num_warps), a compile done (seconds). The
checker keeps the last one and uses it only to word a message ("was still
compiling after 20 s a kernel with BLOCK=524288") when a call overruns its budget;
it never decides a verdict on it, since the submission shares this process and
could silence or fake it.
"""

from __future__ import annotations

import time
from typing import Any, BinaryIO

from graders.runner import gpu_gate
from graders.shared import protocol

_outbox: BinaryIO | None = None
_compile_started: dict[Any, float] = {}


def attach(outbox: BinaryIO) -> None:
    global _outbox
    _outbox = outbox


def emit(event: dict[str, Any]) -> None:
    if _outbox is not None:
        protocol.send(_outbox, {"progress": event})


def _constexprs(compile: dict[str, Any]) -> dict[str, Any]:
    """Plain constexpr values by parameter name, from Triton's hook arguments."""
    out = {}
    fn = compile.get("fn")
    names = getattr(fn, "arg_names", None) if fn is not None else None
    for key, value in (compile.get("constants") or {}).items():
        index = key[0] if isinstance(key, tuple) and key else key
        name = names[index] if names and isinstance(index, int) and index < len(names) else str(key)
        value = getattr(value, "value", value)
        if isinstance(value, (bool, int, float, str)) or value is None:
            out[name] = value
    return out


def install_compile_hooks() -> None:
    """Triton calls jit_cache_hook before it compiles a specialisation, and
    jit_post_compile_hook after. A call that holds the GPU gate gives it back for the
    compile (graders.runner.gpu_gate); its next launch asks again."""
    from triton import knobs

    def before(*, key, repr, fn, compile, is_manual_warmup, already_compiled):  # noqa: A002
        gpu_gate.release()  # compiling is CPU work: another slot's timing may have the GPU
        _compile_started[str(key)] = time.monotonic()
        emit({"event": "compile", "kernel": fn.name,
              "constexprs": _constexprs({**compile, "fn": fn.jit_function}),
              "num_warps": compile.get("num_warps")})
        return False  # a true value would tell Triton to skip the compile

    def after(*, key, repr, fn, compile, is_manual_warmup, already_compiled):  # noqa: A002
        started = _compile_started.pop(str(key), None)
        emit({"event": "compiled", "kernel": fn.name,
              "seconds": round(time.monotonic() - started, 3) if started else None})
        return False

    knobs.runtime.jit_cache_hook = before
    knobs.runtime.jit_post_compile_hook = after
