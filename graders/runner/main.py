"""The runner's loop: hello, known answer, load the submission, then calls.

Protocol (``graders.shared.protocol`` frames on two pipes the checker owns):
  hello          -> device, device name, versions
  warm           -> compile the known-answer kernel for the shape named and import
                    torch's lazy parts, touching no GPU (made while another is timed)
  known_answer   -> the row logsumexp of the array sent, from our own kernel
  load           -> import the submission (its path in the header); report its
                    attributes or the error
  call           -> call an entry point on the arrays sent; reply with the
                    outputs, the inputs as they are after the call, and the
                    number of Triton launches
  perf           -> time an entry point on inputs made here from a seed, beside a
                    copy of the same bytes (graders.runner.timing); raw times back
  perf_rows      -> the rows the checker picked from those timed calls
  perf_warmup    -> call an entry point once on a timed shape's inputs, untimed: its
                    kernels compile while other runners run the checks
  bye            -> exit
While a request is in flight the runner may send progress frames (a compile
starting or done: graders.runner.progress); the checker only words messages with them.
A runner is started before its submission is known (a warm runner waits, toolchain
imported and known answer done); ``load`` names the file. One runner, one submission.
The submission's own stdout and stderr go elsewhere and are never parsed.
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import json
import os
import sys
import threading
import time
import traceback
import warnings
from contextlib import contextmanager
from typing import Any

import numpy as np

from graders.runner import gpu_gate
from graders.shared import autogroup, protocol
from graders.shared.arrays import HostArray
from graders.shared.protocol import SEED_CACHE_ENV

SUBMISSION_MODULE = "submission"


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="graders.runner")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--fds", required=True, help="READ,WRITE file descriptors of the channel")
    return p.parse_args(argv)


class Runner:
    def __init__(self, device: str):
        self.submission = ""  # set by load
        self.requested_device = device
        self.module = None
        self.timed = None  # the last shape's timed outputs, until the checker has its rows
        self.memory = None  # the GPU memory cap (graders.runner.memory_cap), on a GPU

    # -- start-up ---------------------------------------------------------------------
    def import_toolchain(self) -> None:
        """Import torch, pick the device, then triton: TRITON_INTERPRET must precede it."""
        if self.requested_device == "cpu":
            os.environ["TRITON_INTERPRET"] = "1"
        import torch

        if self.requested_device == "auto":
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        else:
            self.device = self.requested_device
        if self.device == "cpu":
            os.environ["TRITON_INTERPRET"] = "1"
            # the interpreter is numpy: overflow in a student's exp is the point of some
            # checks, and its RuntimeWarnings would only bury what the student printed
            np.seterr(all="ignore")
            warnings.filterwarnings("ignore", category=RuntimeWarning)
            if "triton" in sys.modules:
                raise RuntimeError("triton was imported before TRITON_INTERPRET could be set")
        elif not torch.cuda.is_available():
            raise RuntimeError("--device cuda, but torch sees no CUDA device")
        import triton

        if self.device == "cuda":
            quicker_host_stubs()
        from graders.runner import blocks, gpu_figures, guard, launches, progress

        launches.install(self.device)
        guard.install_off_device_refusals()
        blocks.install()
        if self.device == "cpu":  # the language as compiles need it, before any interpreting
            gpu_figures.install()
        if self.device == "cuda":
            progress.install_compile_hooks()
        self.blocks = blocks
        self.torch, self.triton, self.guard = torch, triton, guard
        from graders.runner.timing import clock

        self.clock = clock(torch)  # the timer's parts, before any submission code runs
        if self.device == "cuda":
            from graders.runner.memory_cap import MemoryCap, cap_from_env

            self.memory = MemoryCap(torch, cap_from_env())  # set at the first GPU work

    def hello(self) -> dict[str, Any]:
        torch = self.torch
        name = torch.cuda.get_device_name() if self.device == "cuda" else "CPU (Triton interpreter)"
        return {
            "ok": True,
            "device": self.device,
            "device_name": name,
            "versions": {
                "python": sys.version.split()[0],
                "torch": torch.__version__,
                "triton": self.triton.__version__,
                "numpy": np.__version__,
                "cuda": torch.version.cuda,
            },
        }

    # -- tensors ----------------------------------------------------------------------
    def to_tensor(self, a: HostArray):
        torch = self.torch
        data = np.array(a.data)  # a private, writable copy
        if a.dtype == "bfloat16":
            t = torch.from_numpy(data.view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(data)
        return t.to(self.device)

    def to_host(self, t) -> HostArray:
        torch = self.torch
        names = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
                 torch.int32: "int32", torch.int64: "int64"}
        if t.dtype not in names:
            raise TypeError(f"dtype {t.dtype} is not one the grader accepts")
        t = t.detach().to("cpu").contiguous()
        if t.dtype == torch.bfloat16:
            return HostArray(t.view(torch.int16).numpy().view(np.uint16).copy(), "bfloat16")
        return HostArray(t.numpy().copy(), names[t.dtype])

    # -- operations -------------------------------------------------------------------
    def warm(self, header: dict[str, Any]) -> dict[str, Any]:
        """The CPU-side part of being made ready, which needs no GPU: the known-answer
        kernel's compile, and torch's lazy machinery that the first call under the guard's
        dispatch mode imports (over a second). The slot runs this beside a timed grading;
        only ``known_answer``'s launch waits for the GPU to be free."""
        from graders.runner.known_answer import compile_from_seed

        # before anything compiles, and before any submission: from the grader
        key = header.get("triton_key")
        reply: dict[str, Any] = {
            "ok": True, "triton_key": "handed" if adopt_triton_key(
                key if isinstance(key, str) else None) else "own"}
        if self.device == "cuda":
            try:
                rows, cols = header["known_shape"]
                reply |= compile_from_seed(int(rows), int(cols), os.environ.get(SEED_CACHE_ENV),
                                           os.environ.get("TRITON_CACHE_DIR"))
            except Exception as exc:  # noqa: BLE001 - then the launch compiles, as before
                reply["compile_ahead"] = _describe(exc)
        with self.guard.guarded_call(self.guard.CallGuard(""), "cpu"):
            self.torch.empty(1)
        return reply

    def known_answer(self, arrays: list[HostArray]) -> tuple[dict, list[HostArray]]:
        from graders.runner.known_answer import row_logsumexp

        # the cap before the first allocation: the known answer is this runner's first GPU
        # work, and it passes the GPU gate
        capped = self.memory.install() if self.memory is not None else {}
        from graders.runner import gpu_figures

        with gpu_figures.skipped():  # our own kernel: no figures to check on the CPU
            out = row_logsumexp(self.to_tensor(arrays[0]))
        # the guard's first call on this device, here rather than in a check
        with self.guard.guarded_call(self.guard.CallGuard(""), self.device):
            self.torch.empty(1, device=self.device)
        if self.device == "cuda":
            self.torch.cuda.synchronize()
        return {"ok": True, **({"gpu_memory": capped} if capped else {})}, [self.to_host(out)]

    def load(self, path: str, entry_points: list[str], attributes: list[str],
             hip: dict | None = None) -> dict[str, Any]:
        if self.module is not None or self.submission:
            return _error("grader_error", "this runner has already loaded a submission", None)
        self.submission = os.path.abspath(path)
        if self.submission.endswith((".hip", ".cpp")):
            return self.load_hip(entry_points, hip or {})
        spec = importlib.util.spec_from_file_location(SUBMISSION_MODULE, self.submission)
        module = importlib.util.module_from_spec(spec)
        sys.modules[SUBMISSION_MODULE] = module
        try:
            spec.loader.exec_module(module)
        except SyntaxError as exc:
            return _error("compile_error", f"SyntaxError: {exc.msg}", exc.lineno)
        except BaseException as exc:  # noqa: BLE001 - anything at import time is the student's
            return _error("compile_error", _describe(exc), self.student_line(exc),
                          self.student_traceback(exc))
        for name in entry_points:
            if not callable(getattr(module, name, None)):
                return _error("compile_error", f"your file defines no function `{name}`", None)
        found = {}
        for name in attributes:
            if not hasattr(module, name):
                return _error("compile_error", f"your file defines no `{name}`", None)
            try:
                found[name] = json.loads(json.dumps(getattr(module, name), allow_nan=True))
            except (TypeError, ValueError):
                return _error("compile_error", f"`{name}` must hold plain numbers and strings", None)
        self.module = module
        return {"ok": True, "attributes": found}

    def load_hip(self, entry_points: list[str], hip: dict) -> dict[str, Any]:
        """Compile the HIP file: on a GPU into callable entry points, else only to PTX."""
        from graders.hip import source as hip_source

        try:
            with open(self.submission, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            return _error("compile_error", f"cannot read your file: {exc}", None)
        filename = os.path.basename(self.submission)
        if self.device != "cuda":
            from graders.hip.nvrtc import compile_source

            result = compile_source(text, filename)
            first = hip_source.first_error(result.diagnostics)
            if not result.ok:
                return _error("compile_error", "HIP compile error: " + (
                    first.message if first else result.log[:500]), first.line if first else None,
                    result.log[-4000:])
            warnings = [{"line": d.line, "message": d.message} for d in result.diagnostics
                        if d.severity == "warning"]
            return {"ok": True, "attributes": {}, "compiled_only": True, "warnings": warnings}
        from graders.hip.launch import HipCompileError, load_kernels
        from graders.runner import kernel_facts

        try:
            kernels = {k: v for k, v in hip.get("kernels", {}).items() if k in entry_points}
            functions = load_kernels(self.torch, text, filename, kernels,
                                     int(hip.get("block", 256)), self.guard.record_launch,
                                     kernel_facts.note_launch)
        except HipCompileError as exc:
            return _error("compile_error", exc.message, exc.line, exc.log[-4000:])
        self.module = type(sys)("submission")
        for name, fn in functions.items():
            setattr(self.module, name, fn)
        return {"ok": True, "attributes": {}}

    def call(self, header: dict, arrays: list[HostArray]) -> tuple[dict, list[HostArray]]:
        torch = self.torch
        fn = getattr(self.module, header["fn"])
        tensors = [self.to_tensor(a) for a in arrays]
        args = [_decode(v, tensors) for v in header.get("args", [])]
        kwargs = {k: _decode(v, tensors) for k, v in header.get("kwargs", {}).items()}
        state = self.guard.CallGuard(self.submission)
        self.blocks.take_refusal()  # forget any refusal from before this call
        if self.memory is not None:
            self.memory.reset_peak()
        try:
            with self.guard.guarded_call(state, self.device):
                result = fn(*args, **kwargs)
            if self.device == "cuda":
                torch.cuda.synchronize()
        except BaseException as exc:  # noqa: BLE001
            if state.violations:
                return _rejected(state), []
            if isinstance(exc, KeyboardInterrupt):
                raise
            refusal = self.blocks.take_refusal()
            if refusal is not None:  # fails this check only: the run goes on
                return _error("block_too_large", self.blocks.describe(refusal),
                              self.student_line(exc)), []
            reply = _error(_error_kind(exc), _describe(exc), self.student_line(exc),
                           self.student_traceback(exc))
            # a raise fails its check and the next call may use this runner, unless the
            # GPU context is broken (an illegal address is sticky): then the checker
            # replaces the runner
            reply["error"]["healthy"] = self.device_usable()
            return reply, []
        if state.violations:
            return _rejected(state), []

        gpu_gate.acquire()  # the copies to the host read the GPU (a compile may have let go)
        outputs, problem = [], None
        items = result if isinstance(result, (tuple, list)) else [result]
        for item in items:
            if not isinstance(item, torch.Tensor):
                problem = f"returned {type(item).__name__}, expected a torch.Tensor"
                break
            if state.launches and not state.written_by_a_kernel(item):
                return _error("rejected", f"{header['fn']} returned a tensor that no Triton "
                              "kernel launched in this call was given: the result must be "
                              "written by your kernels (pass the output tensor to the kernel "
                              "that stores it)", None), []
            try:
                outputs.append(self.to_host(item))
            except TypeError as exc:
                problem = f"returned a tensor of {exc}"
                break
        reply = {
            "ok": True,
            "tuple": isinstance(result, (tuple, list)),
            "outputs": len(outputs) if problem is None else 0,
            "output_problem": problem,
            "launches": state.launches,
        }
        if self.memory is not None and self.memory.cap:
            reply["gpu_peak"] = self.memory.peak()  # believed only against the submission
        after = [self.to_host(t) for t in tensors]
        return reply, (outputs if problem is None else []) + after

    def device_usable(self) -> bool:
        """Whether the device still runs work after a call raised (a CUDA error such as an
        illegal address leaves the context broken for every later call)."""
        if self.device != "cuda":
            return True
        try:
            self.torch.cuda.synchronize()
            self.torch.empty(1, device="cuda").zero_()
            self.torch.cuda.synchronize()
        except Exception:  # noqa: BLE001
            return False
        return True

    def perf(self, header: dict) -> tuple[dict, list[HostArray]]:
        from graders.runner import timing

        if self.device != "cuda":
            return _error("grader_error", "timing needs a GPU", None), []
        began = time.perf_counter()
        self.timed = None
        if header.get("first_shape", True):  # later shapes reuse what the one before freed
            self.torch.cuda.empty_cache()
        if self.memory is not None and header.get("gpu_memory_cap"):
            # a timing has the GPU alone: the GPU's one timing reserve beside this job's cap
            self.memory.install(int(header["gpu_memory_cap"]))
        try:
            reply, self.timed = timing.measure(self, header, _decode, began=began)
        except BaseException as exc:  # noqa: BLE001
            if isinstance(exc, KeyboardInterrupt):
                raise
            return _error(_error_kind(exc), _describe(exc) + " (in a timed call)",
                          self.student_line(exc), self.student_traceback(exc)), []
        return reply, []

    def perf_warmup(self, header: dict) -> dict:
        from graders.runner import timing

        if self.device != "cuda" or self.module is None:
            return {"ok": True, "warmed": False}
        return timing.warm_up(self, header, _decode)

    def perf_rows(self, header: dict) -> tuple[dict, list[HostArray]]:
        from graders.runner import timing

        if self.timed is None:
            return _error("grader_error", "no timed run to read rows from", None), []
        try:
            rows = timing.rows_of(self, self.timed, header)
        except (IndexError, ValueError) as exc:
            return _error("grader_error", f"bad row pick: {exc}", None), []
        finally:
            self.timed = None
            if header.get("last_shape", True):  # the timing's memory given back at its end
                self.torch.cuda.empty_cache()
        return {"ok": True, "rows": len(rows)}, rows

    # -- error reporting ----------------------------------------------------------------
    def _frames(self, exc: BaseException):
        seen = set()
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            for frame in traceback.extract_tb(exc.__traceback__):
                yield frame
            exc = exc.__cause__ or exc.__context__

    def student_line(self, exc: BaseException) -> int | None:
        line = None
        for frame in self._frames(exc):
            if frame.filename == self.submission:
                line = frame.lineno  # the deepest frame of the first exception wins
        return line

    def student_traceback(self, exc: BaseException) -> str:
        frames = [f for f in self._frames(exc) if f.filename == self.submission]
        lines = [f"  line {f.lineno}, in {f.name}\n    {f.line}" for f in frames[-5:]]
        return "\n".join(lines)


def adopt_triton_key(key: str | None) -> bool:
    """Triton's version key as the grader worked it out (graders/isolation/triton_key.py),
    so that this runner's first compile does not hash Triton's files again (0.9 s on the
    H200). Set before the submission is imported; the submission could change it only for
    its own compiles' cache keys."""
    if not key or len(key) > 100_000 or not key.isprintable():
        return False
    from triton.runtime import autotuner, cache

    def known_key() -> str:
        return key

    cache.triton_key = known_key  # what get_cache_key calls
    autotuner.triton_key = known_key  # imported by name there
    return True


HOST_STUB_OPTIMIZATION = "-O1"


def quicker_host_stubs() -> None:
    """Triton builds each kernel signature's launcher (and its driver's utilities) with
    gcc -O3, in every runner: 0.23-0.27 s a launcher on the H200, 6 to 9 launchers a
    grading and again in each lane (runner profiles, docs/benchmarks.md "Lanes"). -O1
    builds them in under half the time. The launcher only unpacks arguments and calls
    cuLaunchKernelEx: its host time is never timed (a timed call starts behind a GPU
    spin, graders/runner/timing.py), and what the kernel computes does not depend on it.
    gcc and clang take the last -O given; the flag is added after Triton's own."""
    from triton.runtime import build

    triton_build = build._build
    if getattr(triton_build, "graders_quicker", False):
        return

    def build_quicker(name, src, srcdir, library_dirs, include_dirs, libraries, ccflags):
        return triton_build(name, src, srcdir, library_dirs, include_dirs, libraries,
                            [*(ccflags or []), HOST_STUB_OPTIMIZATION])

    build_quicker.graders_quicker = True
    build._build = build_quicker  # compile_module_from_src calls it by this name


def _error_kind(exc: BaseException) -> str:
    """The verdict family of an exception raised by the submission's call."""
    name = type(exc).__name__
    if name == "CompilationError" and "triton" in type(exc).__module__:
        return "compile_error"
    if isinstance(exc, MemoryError) or name == "OutOfMemoryError":  # host, or torch's CUDA OOM
        return "memory_limit"
    if isinstance(exc, OSError) and exc.errno in (errno.EFBIG, errno.ENOSPC, errno.EDQUOT):
        return "output_limit"  # past the file-size limit, or the private /tmp is full
    return "runtime_error"


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) < 2000 else text[:2000] + " …"


def _error(kind: str, message: str, line: int | None, tb: str = "") -> dict[str, Any]:
    return {"ok": False, "error": {"kind": kind, "message": message, "line": line, "traceback": tb}}


def _rejected(state) -> dict[str, Any]:
    v = state.violations[0]
    return _error("rejected", v.message(), v.line)


def _decode(value: Any, tensors: list) -> Any:
    if isinstance(value, dict):
        if "a" in value:
            return tensors[value["a"]]
        if "f" in value:
            return float(value["f"])
    return value


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    # started at RUNNER_NICE in a session of its own: the nice counts against the other
    # runners and the slots only once the session's group has it too (its torch import
    # and its compiles are the host's largest background work). Beside the start-up: the
    # kernel takes one such change every 0.1 s machine-wide, and runners start in bursts
    threading.Thread(target=autogroup.follow_own_nice, name="autogroup", daemon=True).start()
    read_fd, write_fd = (int(x) for x in args.fds.split(","))
    inbox, outbox = protocol.open_pair(read_fd, write_fd)
    from graders.runner import progress

    progress.attach(outbox)
    gpu_gate.attach(inbox, outbox)
    runner = Runner(args.device)
    try:
        runner.import_toolchain()
    except BaseException as exc:  # noqa: BLE001
        protocol.send(outbox, _error("grader_error", f"runner start-up failed: {_describe(exc)}", None))
        return 3
    profile = _profiler()
    while True:
        try:
            msg = protocol.receive(inbox)
        except EOFError:
            _quick_exit(profile)
        if profile is not None:
            profile.enable()
        op = msg.header.get("op")
        arrays: list[HostArray] = []
        if op == "hello":
            reply = runner.hello()
        elif op == "warm":
            # the grader may raise this runner's priority once it has the answer: no group
            # change of its own after that (graders/shared/autogroup.py)
            autogroup.stop_following()
            try:
                reply = runner.warm(msg.header)
            except BaseException as exc:  # noqa: BLE001
                reply = _error("grader_error", f"warming the runner failed: {_describe(exc)}", None)
        elif op == "known_answer":
            try:
                reply, arrays = runner.known_answer(msg.arrays)
            except BaseException as exc:  # noqa: BLE001
                reply = _error("grader_error", f"known-answer kernel failed: {_describe(exc)}", None)
        elif op == "load":
            reply = runner.load(str(msg.header.get("path", "")), msg.header["entry_points"],
                                msg.header.get("attributes", []), msg.header.get("hip"))
        elif op == "call":
            with gate_asked(msg.header):
                reply, arrays = runner.call(msg.header, msg.arrays)
        elif op == "perf":
            reply, arrays = runner.perf(msg.header)
        elif op == "perf_rows":
            reply, arrays = runner.perf_rows(msg.header)
        elif op == "perf_warmup":
            with gate_asked(msg.header):
                reply = runner.perf_warmup(msg.header)
        elif op == "bye":
            return 0
        else:
            reply = _error("grader_error", f"unknown op {op!r}", None)
        # what the submission printed is in the pipe before the reply: the checker answers
        # the student before this runner has exited, with the output it has read by then
        _flush_prints()
        protocol.send(outbox, reply, arrays)
        if profile is not None:
            profile.disable()


@contextmanager
def gate_asked(header: dict):
    """A request that runs the submission on the GPU: where the checker says so, it holds
    the GPU gate from its first GPU work (asked here) except while Triton compiles
    (graders.runner.gpu_gate); the checker lets the gate go with the reply."""
    gpu_gate.begin(bool(header.get("gate")))
    try:
        gpu_gate.acquire()
        yield
    finally:
        gpu_gate.end()


def _profiler():
    """``GRADERS_RUNNER_PROFILE=1`` in the grader's environment: the runner profiles the
    requests it serves and prints the profile on its output when it is closed, where the
    result's ``output`` shows it (for an operator measuring where a grading's time goes;
    never set in service)."""
    if not os.environ.get("GRADERS_RUNNER_PROFILE"):
        return None
    import cProfile

    return cProfile.Profile()


def _quick_exit(profile=None) -> None:
    """The checker closed the channel: flush what the submission printed and leave at
    once. Python's and CUDA's orderly teardown takes about a second, which a grading of
    several runners would otherwise wait for; the kernel frees everything anyway."""
    if profile is not None:
        import pstats

        stats = pstats.Stats(profile, stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(45)
        stats.sort_stats("tottime").print_stats(25)
    _flush_prints()
    os._exit(0)


def _flush_prints() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a submission may have replaced or closed them
            pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
