"""Compile-only, without a GPU: NVRTC from the ``nvidia-cuda-nvrtc-cu12`` wheel through
``cuda-bindings``, to PTX for compute_90 (the H200's architecture)."""

from __future__ import annotations

from dataclasses import dataclass

from graders.hip.source import Diagnostic, parse_log, prepare

OPTIONS = ("--gpu-architecture=compute_90", "--std=c++17", "-default-device")


@dataclass
class CompileResult:
    ok: bool
    log: str
    diagnostics: list[Diagnostic]


def compile_source(source: str, filename: str) -> CompileResult:
    from cuda.bindings import nvrtc  # imported here: only HIP gradings need it

    def check(result, what):
        err = result[0]
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"NVRTC {what} failed: {err}")
        return result[1:] if len(result) > 1 else None

    text = prepare(source, filename).encode()
    (prog,) = check(nvrtc.nvrtcCreateProgram(text, filename.encode(), 0, [], []), "create")
    try:
        opts = [o.encode() for o in OPTIONS]
        status = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0]
        (size,) = check(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
        # NVRTC writes the log into the buffer it is given: a bytearray of our own. The
        # samples' `b" " * size` is an immutable bytes, and at size 1 (an empty log) it is
        # CPython's shared one-byte b" ": NVRTC's NUL went into it, and every b" " of the
        # process read back as b"\x00" from then on (unquote("a%20b") gave "a\x00b")
        buf = bytearray(size)
        check(nvrtc.nvrtcGetProgramLog(prog, buf), "log")
        log = buf.decode(errors="replace").rstrip("\x00").strip()
        ok = status == nvrtc.nvrtcResult.NVRTC_SUCCESS
        return CompileResult(ok, log, parse_log(log, filename))
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
