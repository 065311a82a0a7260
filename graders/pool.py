"""Runners made ready before their submission arrives.

Starting a runner costs seconds: the sandbox, importing torch and Triton, creating the
CUDA context, compiling the grader's own known-answer kernel. None of that depends on
the submission, so a slot keeps a few runners ready (``RunnerPool(warm=N)``) and a
grading takes them at once. Each runner still serves exactly one submission and is
thrown away after it: a warm runner has run only trusted code.

``prepare`` starts one runner and proves it: the runner says which device it got, and
computes the row logsumexp of random input with the grader's own kernel, which the
checker compares with its float64 answer. A runner that fails this is a grader fault.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .arrays import from_f64
from .launch import Launcher, RunnerProcess, runner_env, start_runner
from .seed_cache import make_seed_cache, remove_seed_cache
from .session import RunStopped, Session
from .vocabulary import Device, Verdict

log = logging.getLogger(__name__)
KNOWN_ANSWER_RTOL = 1e-5
PREPARE_TIMEOUT_S = 120.0  # starting and proving a runner; far more than it takes
CPU_SECONDS = 900  # RLIMIT_CPU of a runner (its threads add up); the wall clock rules


class GpuGate:
    """Timing has the GPU to itself: warm runners being prepared touch the GPU (context,
    known-answer kernel) only outside a timed phase. Many preparers may pass at once;
    timing waits for those inside, and new ones wait for timing."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._sharing = 0
        self._exclusive = False
        self._waiting_exclusive = 0

    @contextmanager
    def shared(self):
        with self._cond:
            while self._exclusive or self._waiting_exclusive:
                self._cond.wait()
            self._sharing += 1
        try:
            yield
        finally:
            with self._cond:
                self._sharing -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self):
        with self._cond:
            self._waiting_exclusive += 1
            while self._exclusive or self._sharing:
                self._cond.wait()
            self._waiting_exclusive -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


@dataclass
class ReadyRunner:
    process: RunnerProcess
    hello: dict[str, Any]
    prepare_s: float  # how long starting and proving it took
    phases: dict[str, float] = field(default_factory=dict)
    seed_cache: str = "none"  # what the runner said of the slot's seed cache (graders.seed_cache)


KNOWN_SHAPE = (5, 300)  # the runner compiles its known-answer kernel for it ahead ("warm")


def known_answer(session: Session, rng: np.random.Generator) -> None:
    x = rng.standard_normal(KNOWN_SHAPE) * 4
    x32 = from_f64(x, "float32")
    reply = session.request({"op": "known_answer"}, [x32], during="in the known-answer kernel",
                            trusted=True)
    ref = x32.to_f64()
    m = ref.max(axis=1)
    expected = m + np.log(np.exp(ref - m[:, None]).sum(axis=1))
    got = reply.arrays[0].to_f64() if reply.arrays else np.full(5, np.nan)
    if got.shape != expected.shape or not np.allclose(got, expected, rtol=KNOWN_ANSWER_RTOL,
                                                      atol=0):
        raise RunStopped(Verdict.GRADER_ERROR,
                         "Triton computed the grader's own known-answer kernel wrong "
                         f"(got {got[:3].tolist()}, expected {expected[:3].tolist()}): the "
                         "toolchain is broken (triton 3.6's interpreter needs numpy < 2.3)")


def prepare(device: Device, launcher: Launcher, gate: GpuGate | None = None) -> ReadyRunner:
    """Start a runner and prove its toolchain; raises RunStopped(grader_error) if it can't.
    Its first GPU work (the CUDA context, the known-answer kernel) passes ``gate``."""
    started = time.monotonic()
    try:
        runner = start_runner(device.value, CPU_SECONDS, launcher)
    except OSError as exc:
        raise RunStopped(Verdict.GRADER_ERROR, f"could not start the runner: {exc}") from None
    runner.arm(PREPARE_TIMEOUT_S)
    session = Session(runner, PREPARE_TIMEOUT_S, launcher.limits, launcher.sandboxed)
    try:
        hello = session.request({"op": "hello"}, during="while starting", trusted=True).header
        hello_s = time.monotonic() - started
        warmed = session.request({"op": "warm", "known_shape": list(KNOWN_SHAPE)},
                                 during="while warming up", trusted=True).header
        seed = warmed.get("seed", "none")
        if warmed.get("compile_ahead"):
            log.warning("the known-answer kernel did not compile ahead (it compiles at its "
                        "launch instead): %s", warmed["compile_ahead"])
        warm_s = time.monotonic() - started - hello_s
        # only the first GPU work (the CUDA context, one small launch) waits for a timing
        with gate.shared() if gate else nullcontext():
            gated = time.monotonic()
            known_answer(session, np.random.default_rng(secrets.randbits(64)))
            gpu_s = time.monotonic() - gated
    except RunStopped as stop:
        runner.close()
        if stop.verdict is Verdict.TIMEOUT:
            stop = RunStopped(Verdict.GRADER_ERROR, f"a runner did not start: {stop.message}")
        raise stop
    runner.disarm()
    total = time.monotonic() - started
    log.info("runner ready in %.2f s: started %.2f, warmed %.2f (seed cache: %s), known answer "
             "%.2f (%.2f of it past the GPU gate)", total, hello_s, warm_s, seed,
             total - hello_s - warm_s, gpu_s)
    return ReadyRunner(runner, dict(hello), total,
                       {"runner_start_s": round(hello_s, 3), "warm_s": round(warm_s, 3),
                        "known_answer_s": round(total - hello_s - warm_s, 3),
                        "known_answer_gpu_s": round(gpu_s, 3)}, seed_cache=str(seed))


class RunnerPool:
    """Ready runners for one device and launcher. ``warm``: how many to keep ready.

    ``take`` hands out a ready runner (or prepares one on the spot) and starts
    replacing it in the background; ``gpu_gate.exclusive()`` keeps those replacements
    off the GPU while a grading is timed. ``wait_idle`` blocks until none is being
    prepared (the slot's health check compares memory with all of them in place).
    """

    def __init__(self, device: Device, launcher: Launcher, warm: int = 0):
        self.device, self.launcher, self.warm = device, launcher, warm
        self.gpu_gate = GpuGate()
        self._ready: list[ReadyRunner] = []
        self._preparing = 0
        self._closed = False
        self._failures = 0
        self._last_failure = ""
        self._cond = threading.Condition()
        self._seeding: threading.Thread | None = None

    def _seed(self) -> None:
        """Make the slot's seed cache (graders.seed_cache); runners started from then on
        copy it instead of compiling the known-answer kernel."""
        cache = make_seed_cache(KNOWN_SHAPE, self.launcher.gpu_index, runner_env())
        with self._cond:
            if self._closed:
                remove_seed_cache(cache)
            else:
                self.launcher.seed_cache = cache

    def seed_cache(self, timeout_s: float = PREPARE_TIMEOUT_S):
        """The seed cache once it is made (None if there is none, or not yet)."""
        if self._seeding is not None:
            self._seeding.join(timeout_s)
        return getattr(self.launcher, "seed_cache", None)

    def fill(self) -> None:
        """Start preparing runners until ``warm`` are ready or being prepared."""
        if (self._seeding is None and self.warm and self.device is Device.CUDA
                and hasattr(self.launcher, "seed_cache")):
            # only a slot that keeps runners ready gains: a one-shot grading would wait
            self._seeding = threading.Thread(target=self._seed, daemon=True, name="seed-cache")
            self._seeding.start()
        with self._cond:
            want = self.warm - len(self._ready) - self._preparing
            if self._closed or want <= 0 or self._failures >= 3:
                return  # three failures in a row: stop trying until a take succeeds
            self._preparing += want
        for _ in range(want):
            threading.Thread(target=self._prepare_one, daemon=True, name="runner-prep").start()

    def _prepare_one(self) -> None:
        ready = None
        try:
            ready = prepare(self.device, self.launcher, self.gpu_gate)
        except RunStopped as stop:
            log.error("a warm runner failed to start: %s", stop.message)
            self._last_failure = stop.message
        with self._cond:
            self._preparing -= 1
            if ready is not None and not self._closed:
                self._ready.append(ready)
                self._failures = 0
            elif ready is None:
                self._failures += 1
            self._cond.notify_all()
        if ready is not None and self._closed:
            ready.process.close()

    def take_ready(self, wait_s: float = 0.0) -> ReadyRunner | None:
        """A runner that is ready now or within ``wait_s``, or None; never starts one."""
        deadline = time.monotonic() + wait_s
        with self._cond:
            while not self._ready and time.monotonic() < deadline:
                self._cond.wait(timeout=deadline - time.monotonic())
            ready = self._ready.pop(0) if self._ready else None
        if ready is not None:
            ready.phases = {"runner_start_s": 0.0, "known_answer_s": 0.0}  # done ahead
            self.fill()
        return ready

    def take(self) -> ReadyRunner:
        """A ready runner, or one prepared on the spot (raises RunStopped if it can't be)."""
        ready = self.take_ready()
        if ready is not None:
            return ready
        ready = prepare(self.device, self.launcher, self.gpu_gate)
        with self._cond:
            self._failures = 0
        self.fill()
        return ready

    def first_ready(self, timeout_s: float = PREPARE_TIMEOUT_S) -> str:
        """Wait for the first warm runner: "" once one is ready (it started and proved its
        toolchain on the known-answer kernel), else why none could be: every one being
        prepared failed, or none was ready within ``timeout_s``. A worker says it is ready
        only after this, so that one whose runners cannot start takes no work."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not self._ready:
                if not self._preparing:
                    return self._last_failure or "no runner is being prepared"
                if time.monotonic() >= deadline:
                    return f"no runner was ready within {timeout_s:g} s"
                self._cond.wait(timeout=deadline - time.monotonic())
        return ""

    def wait_idle(self, timeout_s: float = PREPARE_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._preparing and time.monotonic() < deadline:
                self._cond.wait(timeout=max(0.0, deadline - time.monotonic()))

    @property
    def ready_count(self) -> int:
        with self._cond:
            return len(self._ready)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            ready, self._ready = self._ready, []
            cache = getattr(self.launcher, "seed_cache", None)
            if cache is not None:
                self.launcher.seed_cache = None
        for r in ready:
            r.process.close()
        remove_seed_cache(cache)
