"""One conversation with one runner: requests, their budgets, and how a runner died.

Every request may carry a budget (seconds for the reply, compile and run included).
Past it the runner is killed and ``CallOverrun`` raised: that fails the check in
flight, not the run; the checker replaces the runner. Everything else that kills a
runner ends the run with a verdict (``RunStopped``). Progress frames that arrive
before a reply are kept, to word an overrun's message, and never believed further.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Callable, ContextManager, Protocol

from graders.isolation import gpu_memory
from graders.isolation.launch import RunnerProcess, _start_timer
from graders.isolation.sandbox import Limits
from graders.shared import protocol
from graders.shared.arrays import HostArray
from graders.shared.vocabulary import Verdict


class SharedGate(Protocol):
    """What a request needs of the GPU gate (graders.isolation.pool.GpuGate, whose module
    starts runners through this one)."""

    def shared(self) -> ContextManager[None]: ...


# error kinds the runner reports that end the whole run, and their verdicts
_RUN_ENDING = {"compile_error": Verdict.COMPILE_ERROR, "rejected": Verdict.REJECTED,
               "grader_error": Verdict.GRADER_ERROR, "memory_limit": Verdict.MEMORY_LIMIT,
               "output_limit": Verdict.OUTPUT_LIMIT}
# error kinds that fail only the check whose call caused them
CHECK_FAILING = frozenset({"block_too_large"})
# ...and, for a call of the submission, what it raised: a kernel that raises on one shape
# (rows too long for its design) loses that check, not the points of the others
RAISED = frozenset({"runtime_error", "compile_error"})


class RunStopped(Exception):
    """A problem that ends the whole run with a verdict (not just one check)."""

    def __init__(self, verdict: Verdict, message: str, line: int | None = None):
        super().__init__(message)
        self.verdict, self.message, self.line = verdict, message, line
        self.check: str | None = None  # the check whose call ended the run, if one did


class CallOverrun(Exception):
    """A call was not answered within its budget; the runner has been killed."""

    def __init__(self, budget_s: float, progress: dict[str, Any] | None, during: str,
                 on_gpu: bool = False):
        super().__init__(f"over budget {during}")
        self.budget_s, self.progress, self.during = budget_s, progress, during
        self.on_gpu = on_gpu  # it held the GPU gate past ``budget_s`` (its GPU-work budget)


class CallRefused(Exception):
    """A call failed in a way that fails its check only: a block too large, or (for a call
    of the submission) an exception it raised. ``healthy`` is False when the runner says
    its device no longer works (then it is replaced); it is only ever believed to cost
    the submission a runner."""

    def __init__(self, kind: str, message: str, line: int | None, traceback: str = "",
                 healthy: bool = True):
        super().__init__(message)
        self.kind, self.message, self.line = kind, message, line
        self.traceback, self.healthy = traceback, healthy


class RunnerCrashed(RunStopped):
    """The runner died during a call (a signal, or it exited) for no limit of ours."""


def _clean_progress(header: dict[str, Any]) -> dict[str, Any] | None:
    """An untrusted progress frame, reduced to short plain values."""
    event = header.get("progress")
    if not isinstance(event, dict):
        return None
    out: dict[str, Any] = {}
    for key in ("event", "kernel", "num_warps", "seconds"):
        value = event.get(key)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            out[key] = value[:80] if isinstance(value, str) else value
    constexprs = event.get("constexprs")
    if isinstance(constexprs, dict):
        out["constexprs"] = {str(k)[:40]: v for k, v in list(constexprs.items())[:12]
                             if isinstance(v, (int, float, str, bool)) or v is None}
    return out


class _GateHold:
    """The GPU gate held shared on a runner's behalf during one request: taken when the
    runner asks (``acquire``, before GPU work) with the call's budget paused while another
    slot's timing keeps it waiting, given back when it says a compile starts (``release``)
    and when the request ends. A runner that asks where it was not told to has written to
    the checker's channel.

    ``hold_s``: how long one holding may last. Every timing on the GPU waits for a holder,
    and every other check waits behind that timing, so a kernel that never ends (the
    hostile mix's endless.py) stalled the whole GPU for the call's budget (20 s, set for
    compiles, which no longer hold the gate). Past ``hold_s`` the runner is killed and the
    call is over its budget, as a call past its whole budget is."""

    def __init__(self, gate: SharedGate | None, runner: RunnerProcess,
                 hold_s: float | None = None):
        self.gate, self.runner, self.hold_s = gate, runner, hold_s
        self._held: Any = None  # the gate's shared() context while it is held
        self._timer: threading.Timer | None = None
        self.expired = False  # the runner was killed for holding the gate past hold_s

    def answer(self, what: Any) -> None:
        if self.gate is None or what not in ("acquire", "release"):
            raise protocol.ProtocolError(f"a gate request {what!r} nobody asked for")
        if what == "release":
            self.let_go()
            return
        if self._held is None:
            self.runner.pause_call()  # waiting for the GPU is not the submission's time
            held = self.gate.shared()
            held.__enter__()
            self._held = held
            self.runner.resume_call()
            if self.hold_s:
                self._timer = _start_timer(self.hold_s, self._expire)
        self.runner.send({"gate": "held"})

    def _expire(self) -> None:
        self.expired = True
        self.runner._on_budget()  # killed as a call past its budget is

    def let_go(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._held is not None:
            held, self._held = self._held, None
            held.__exit__(None, None, None)


class Session:
    """Requests to one runner. ``on_progress`` sees each progress frame (cleaned)."""

    def __init__(self, runner: RunnerProcess, timeout_s: float, limits: Limits, sandboxed: bool,
                 on_progress: Callable[[dict[str, Any]], None] | None = None):
        self.runner = runner
        self.timeout_s = timeout_s
        self.limits = limits
        self.runner_sandboxed = sandboxed
        self.on_progress = on_progress
        self.last_progress: dict[str, Any] | None = None
        self._extra: dict[str, Any] = {}  # fields every request carries (a timing's cap)

    @contextmanager
    def timing_memory(self):
        """While this runner times (the GPU alone, graders.isolation.pool.GpuGate): its GPU
        memory cap raised by the GPU's one timing reserve, in the runner (each ``perf``
        request says so) and in the watch of what the driver reports."""
        base = self.runner.gpu_cap
        if not base:
            yield
            return
        self.runner.gpu_cap = gpu_memory.timing_cap(base)
        self._extra = {"gpu_memory_cap": self.runner.gpu_cap}
        try:
            yield
        finally:
            self.runner.gpu_cap, self._extra = base, {}

    def request(self, header: dict[str, Any], arrays: list[HostArray] | None = None,
                during: str = "", trusted: bool = False,
                budget_s: float | None = None, raises_fail_check: bool = False,
                gate: SharedGate | None = None, gate_hold_s: float | None = None
                ) -> protocol.Message:
        """One exchange. ``trusted``: no student code has run yet, so a death is ours.
        ``raises_fail_check``: a call of the submission, whose exceptions fail its check
        (``CallRefused``) rather than end the run. ``gate``: the GPU's gate, held shared
        for the runner while it runs GPU work and not while it compiles (the runner asks,
        graders.runner.gpu_gate); let go with the reply, whatever the runner said.
        ``gate_hold_s``: the longest one holding of it may last (``_GateHold``)."""
        self.last_progress = None
        hold = _GateHold(gate, self.runner, gate_hold_s)
        if gate is not None:
            header = {**header, "gate": True}
        try:
            self.runner.begin_call(budget_s)
            self.runner.send({**header, **self._extra} if self._extra else header, arrays)
            while True:
                reply = self.runner.receive()
                if "progress" in reply.header and "ok" not in reply.header:
                    self.last_progress = _clean_progress(reply.header)
                    if self.last_progress and self.on_progress:
                        self.on_progress(self.last_progress)
                    continue
                if "gate" in reply.header and "ok" not in reply.header:
                    hold.answer(reply.header["gate"])
                    continue
                break
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError, ValueError):
            if hold.expired and not self.runner.killed_at_deadline:
                raise CallOverrun(hold.hold_s or 0.0, self.last_progress, during,
                                  on_gpu=True) from None
            if self.runner.over_budget and not self.runner.killed_at_deadline:
                raise CallOverrun(budget_s or 0.0, self.last_progress, during) from None
            death = self._death(during)
            if trusted and death.verdict is not Verdict.TIMEOUT:
                tail = self.runner.output.text()[-500:] if self.runner.output else ""
                raise RunStopped(Verdict.GRADER_ERROR,
                                 f"the runner failed {during} ({death.message}): {tail}") from None
            raise death from None
        except protocol.ProtocolError as exc:
            raise RunStopped(Verdict.REJECTED,
                             f"the grader's channel carried a malformed reply ({exc}) {during}: "
                             "submissions must not write to the grader's channel") from None
        finally:
            hold.let_go()
            self.runner.end_call()
        if not reply.header.get("ok", False):
            error = reply.header.get("error") or {}
            kind = error.get("kind", "runtime_error")
            message = str(error.get("message", "unknown error"))
            line = error.get("line") if isinstance(error.get("line"), int) else None
            if kind in CHECK_FAILING or (raises_fail_check and kind in RAISED):
                raise CallRefused(kind, message, line, str(error.get("traceback") or ""),
                                  error.get("healthy") is not False)
            if kind == "memory_limit" and self._not_its_own_oom():
                raise RunStopped(Verdict.GRADER_ERROR, gpu_memory.not_yours_message(during))
            raise RunStopped(_RUN_ENDING.get(kind, Verdict.RUNTIME_ERROR),
                             run_message(message, line, during, str(error.get("traceback") or "")),
                             line)
        self._hold_to_cap(reply.header, during)
        return reply

    def _not_its_own_oom(self) -> bool:
        """A CUDA out-of-memory the job did not cause: the trusted side saw the GPU full
        while the driver's figure for this job was within its cap (gpu_memory.oom_verdict)."""
        runner = self.runner
        if not runner.gpu_cap or runner.gpu_index is None:
            return False
        gpu_memory.SAMPLES.get(runner.gpu_index)  # a reading now notes a GPU full now
        own = runner.gpu_usage()
        full = gpu_memory.SAMPLES.full_recently(runner.gpu_index)
        return gpu_memory.oom_verdict(runner.gpu_cap, own, full) == "grader_error"

    def _hold_to_cap(self, header: dict[str, Any], during: str) -> None:
        """A call's reply says what torch reserved at its peak: above the cap (the
        submission lifted its fraction) the job is over it, by its own account."""
        peak, cap = header.get("gpu_peak"), self.runner.gpu_cap
        if cap and isinstance(peak, int) and not isinstance(peak, bool) and \
                peak > cap + gpu_memory.PEAK_SLACK_BYTES:
            raise RunStopped(Verdict.MEMORY_LIMIT, gpu_memory.over_cap_message(peak, cap, during))

    def _death(self, during: str) -> RunStopped:
        runner = self.runner
        limits = self.limits
        if runner.killed_at_deadline:
            return RunStopped(Verdict.TIMEOUT,
                              f"the run went past its {self.timeout_s:g} s limit {during}: "
                              "an endless loop, or a kernel far too slow?".replace("  ", " "))
        if runner.forked_too_much:  # a fork bomb: the run ends here
            return RunStopped(Verdict.RUNTIME_ERROR, fork_bomb_message(runner.max_processes,
                                                                       during))
        if runner.flooded_output:
            return RunStopped(Verdict.OUTPUT_LIMIT,
                              f"the submission printed more than {limits.output_max_bytes >> 20}"
                              f" MiB {during}; it was stopped (the first "
                              f"{limits.output_keep_bytes >> 10} KiB are kept)")
        try:
            code = runner.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            code = None
        if runner.gpu_over:
            return RunStopped(Verdict.MEMORY_LIMIT,
                              gpu_memory.over_cap_message(
                                  runner.gpu_over, gpu_memory.driver_limit(runner.gpu_cap),
                                  during))
        if runner.out_of_memory:
            return RunStopped(Verdict.MEMORY_LIMIT,
                              f"the submission used more than {limits.memory_bytes >> 30} GiB of "
                              f"memory {during} and was killed")
        if code is not None and code > 128 and self.runner_sandboxed:
            code = 128 - code  # bwrap exits 128 + N when its child dies of signal N
        if code is not None and code < 0 and -code == signal.SIGXCPU:
            return RunStopped(Verdict.TIMEOUT, f"the submission used up its CPU time {during}")
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            hint = {"SIGSEGV": "an out-of-bounds load or store?",
                    "SIGKILL": "killed, perhaps for using too much memory",
                    "SIGBUS": "an out-of-bounds access?"}.get(name, "")
            return RunnerCrashed(Verdict.RUNTIME_ERROR, f"the submission crashed with {name} "
                                 f"{during}{': ' + hint if hint else ''}")
        return RunnerCrashed(Verdict.RUNTIME_ERROR,
                             f"the submission's process exited (status {code}) {during}")


def fork_bomb_message(cap: int, during: str) -> str:
    return (f"the submission started more than {cap} processes {during} (a fork bomb?) and "
            "was stopped; the checks already passed keep their points")


def run_message(message: str, line: int | None, during: str, traceback: str = "") -> str:
    """An error that ends the run, as the student reads it: what was raised, their line,
    where (the check and the call), then their frames."""
    if line:
        message += f" (line {line} of your file)"
    if during:
        message += f" {during}"
    if traceback:
        message += "\n" + traceback
    return message


def overrun_message(overrun: CallOverrun, call_label: str) -> str:
    """What the student reads for a call past its budget, worded from the last progress."""
    budget = f"{overrun.budget_s:g} s"
    if overrun.on_gpu:
        return (f"{call_label} kept the GPU busy for more than {budget} without answering "
                "(an endless loop in a kernel, or one far too slow?), and the GPU is shared "
                "with the rest of the class")
    p = overrun.progress or {}
    kernel = f" `{p['kernel']}`" if p.get("kernel") else ""
    if p.get("event") == "compile":
        constexprs = ", ".join(f"{k}={v}" for k, v in (p.get("constexprs") or {}).items())
        warps = f", num_warps={p['num_warps']}" if p.get("num_warps") else ""
        detail = f" ({constexprs}{warps})" if constexprs or warps else ""
        return (f"{call_label} was still compiling after {budget} a kernel{kernel}{detail}: "
                "a kernel that takes this long to compile holds too much in one program")
    return (f"{call_label} was still running after {budget}: an endless loop, or a kernel "
            "far too slow?")
