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

import fcntl
import logging
import os
import secrets
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from graders.isolation import bytecode, triton_key
from graders.isolation.gpu_memory import cap_env
from graders.isolation.launch import (RUNNER_NICE, Launcher, RunnerProcess, ahead_nice,
                                      runner_env, start_runner)
from graders.isolation.seed_cache import make_seed_cache, remove_seed_cache
from graders.isolation.session import RunStopped, Session
from graders.shared.arrays import from_f64
from graders.shared.vocabulary import Device, Verdict

log = logging.getLogger(__name__)
KNOWN_ANSWER_RTOL = 1e-5
PREPARE_TIMEOUT_S = 120.0  # starting and proving a runner; far more than it takes
CPU_SECONDS = 900  # RLIMIT_CPU of a runner (its threads add up); the wall clock rules


def gpu_lock_dir() -> Path:
    """Where the per-GPU gate files live (read at each call: the tests point it elsewhere)."""
    return Path(os.environ.get("GRADERS_GPU_LOCK_DIR", "/run/graders-gpu-locks"))


class GpuGate:
    """Timing has the GPU to itself: warm runners being prepared, and the checks of other
    gradings, touch the GPU only outside a timed phase. Many sharers may pass at once;
    timing waits for those inside, and new ones wait for timing (writer preference, or a
    steady stream of checks would keep a timing waiting for ever).

    ``lock_path`` (a per-GPU file, see ``for_gpu``) makes the gate hold across processes:
    the slot processes that share one GPU each have a gate on the same file. Shared takes
    ``LOCK_SH`` on it, exclusive ``LOCK_EX``. flock alone would let a stream of shared
    takers starve an exclusive one, so a second file is a turnstile: a shared taker passes
    through it (takes it and lets go) before its ``LOCK_SH``; an exclusive taker holds it
    while it waits for ``LOCK_EX``, which stops new shared takers of every process.

    Within a process the in-process gate is passed first, so at most one thread of a
    process stands at the files as the exclusive taker. Each taking opens its own file
    descriptions: flock locks belong to them, not to the thread or the process. The fds
    are close-on-exec (Python's default), so a runner started meanwhile inherits no lock.
    A gate is not re-entrant: a thread that holds it shared must not ask again.
    """

    def __init__(self, lock_path: Path | None = None) -> None:
        self._cond = threading.Condition()
        self._sharing = 0
        self._exclusive = False
        self._waiting_exclusive = 0
        self.lock_path = lock_path
        self.turnstile_path = (lock_path.with_name(lock_path.name + ".turnstile")
                               if lock_path is not None else None)

    @classmethod
    def for_gpu(cls, gpu_index: int | None, required: bool = False) -> "GpuGate":
        """The gate of GPU ``gpu_index``, shared with every process on this host that
        grades on it; in-process only where the lock directory cannot be made, unless
        ``required`` (a slot that shares its GPU: without the files its checks would run
        into another slot's timing), when the OSError is raised."""
        if gpu_index is None:
            return cls()
        folder = gpu_lock_dir()
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            path = folder / f"gpu{gpu_index}"
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))  # fails here, not mid-job
        except OSError as exc:
            if required:
                raise
            log.info("GPU %s gate is this process's only (%s): no other grader on the GPU "
                     "is kept off its timing", gpu_index, exc)
            return cls()
        return cls(path)

    @staticmethod
    def _flock(path: Path, how: int) -> int:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, how)
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextmanager
    def shared(self):
        with self._cond:
            while self._exclusive or self._waiting_exclusive:
                self._cond.wait()
            self._sharing += 1
        fd = None
        try:
            if self.lock_path is not None:
                # through the turnstile: blocked while another process's timing waits
                os.close(self._flock(self.turnstile_path, fcntl.LOCK_EX))
                fd = self._flock(self.lock_path, fcntl.LOCK_SH)
            yield
        finally:
            if fd is not None:
                os.close(fd)  # the lock goes with it
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
        fd = None
        try:
            if self.lock_path is not None:
                turnstile = self._flock(self.turnstile_path, fcntl.LOCK_EX)
                try:  # new sharers of every process wait at the turnstile meanwhile
                    fd = self._flock(self.lock_path, fcntl.LOCK_EX)
                finally:
                    os.close(turnstile)
            yield
        finally:
            if fd is not None:
                os.close(fd)
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


class NotRaised(RunStopped):
    """A runner made ahead below the runners' nice could not be raised to it."""


@dataclass
class ReadyRunner:
    process: RunnerProcess
    hello: dict[str, Any]
    prepare_s: float  # how long starting and proving it took
    phases: dict[str, float] = field(default_factory=dict)
    # what the runner said of the slot's seed cache (graders.isolation.seed_cache)
    seed_cache: str = "none"


KNOWN_SHAPE = (5, 300)  # the runner compiles its known-answer kernel for it ahead ("warm")


def known_answer(session: Session, rng: np.random.Generator) -> dict[str, Any]:
    """Prove the runner's toolchain; what it said of its GPU memory cap (set just before:
    graders/runner/memory_cap.py), {} without one."""
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
    capped = reply.header.get("gpu_memory")
    return capped if isinstance(capped, dict) else {}


def prepare(device: Device, launcher: Launcher, gate: GpuGate | None = None,
            nice: int = RUNNER_NICE,
            on_started: Callable[[RunnerProcess], None] | None = None) -> ReadyRunner:
    """Start a runner and prove its toolchain; raises RunStopped(grader_error) if it can't.
    Its first GPU work (the CUDA context, the known-answer kernel) passes ``gate``. It
    starts and imports at ``nice`` (a pool's, made ahead: AHEAD_NICE), and is raised to
    RUNNER_NICE before that GPU work: a timing waits at the gate for whoever is past it."""
    started = time.monotonic()
    triton_key.begin()  # Triton's key is worked out (or read back) while the runner starts
    try:
        runner = start_runner(device.value, CPU_SECONDS, launcher, nice=nice)
    except OSError as exc:
        raise RunStopped(Verdict.GRADER_ERROR, f"could not start the runner: {exc}") from None
    if on_started is not None:
        try:
            on_started(runner)
        except BaseException:
            runner.close()
            raise
    runner.arm(PREPARE_TIMEOUT_S)
    session = Session(runner, PREPARE_TIMEOUT_S, launcher.limits, launcher.sandboxed)
    try:
        hello = session.request({"op": "hello"}, during="while starting", trusted=True).header
        hello_s = time.monotonic() - started
        # Triton's key, worked out once here: the runner hashed Triton's files otherwise
        warmed = session.request({"op": "warm", "known_shape": list(KNOWN_SHAPE),
                                  "triton_key": triton_key.triton_key()},
                                 during="while warming up", trusted=True).header
        seed = warmed.get("seed", "none")
        if warmed.get("compile_ahead"):
            log.warning("the known-answer kernel did not compile ahead (it compiles at its "
                        "launch instead): %s", warmed["compile_ahead"])
        warm_s = time.monotonic() - started - hello_s
        if nice != RUNNER_NICE and not (runner.set_priority(RUNNER_NICE)
                                         or runner.set_priority(RUNNER_NICE)):
            # never past the gate, nor into a grading, below the others
            raise NotRaised(Verdict.GRADER_ERROR, f"a runner made at nice {nice} could not "
                                                  f"be raised to {RUNNER_NICE}")
        # only the first GPU work (the CUDA context, one small launch) waits for a timing
        with gate.shared() if gate else nullcontext():
            gated = time.monotonic()
            capped = known_answer(session, np.random.default_rng(secrets.randbits(64)))
            gpu_s = time.monotonic() - gated
    except RunStopped as stop:
        runner.close()
        if stop.verdict is Verdict.TIMEOUT:
            stop = RunStopped(Verdict.GRADER_ERROR, f"a runner did not start: {stop.message}")
        raise stop
    runner.disarm()
    total = time.monotonic() - started
    log.info("runner ready in %.2f s: started %.2f, warmed %.2f (seed cache: %s), known answer "
             "%.2f (%.2f of it past the GPU gate)%s", total, hello_s, warm_s, seed,
             total - hello_s - warm_s, gpu_s,
             f"; GPU memory cap {capped.get('cap')} of {capped.get('total')} bytes"
             if capped else "")
    return ReadyRunner(runner, dict(hello), total,
                       {"runner_start_s": round(hello_s, 3), "warm_s": round(warm_s, 3),
                        "known_answer_s": round(total - hello_s - warm_s, 3),
                        "known_answer_gpu_s": round(gpu_s, 3),
                        "triton_key": str(warmed.get("triton_key", "own"))},
                       seed_cache=str(seed))


class RunnerPool:
    """Ready runners for one device and launcher. ``warm``: how many to keep ready.

    ``take`` hands out a ready runner (or prepares one on the spot) and starts
    replacing it in the background; ``gpu_gate.exclusive()`` keeps those replacements
    (and, on a GPU, the checks of every grading on it) off the GPU while a grading is
    timed. ``wait_idle`` blocks until none is being
    prepared (the slot's health check compares memory with all of them in place).
    """

    def __init__(self, device: Device, launcher: Launcher, warm: int = 0,
                 gate: GpuGate | None = None):
        self.device, self.launcher, self.warm = device, launcher, warm
        # on a GPU, the gate of that GPU for the whole host (GpuGate.for_gpu): another
        # process grading on it keeps its checks and preparers off this pool's timing
        self.gpu_gate = gate or (GpuGate.for_gpu(getattr(launcher, "gpu_index", None))
                                 if device is Device.CUDA else GpuGate())
        self._ready: list[ReadyRunner] = []
        self._preparing = 0
        self._closed = False
        self._failures = 0
        self._last_failure = ""
        self._cond = threading.Condition()
        self._seeding: threading.Thread | None = None
        # runners made ahead import below every runner that grades (launch.AHEAD_NICE),
        # where they can be raised again before they touch the GPU; but only while the pool
        # still holds one grading's runners (``reserve``: the warm count is two gradings'
        # lanes and a spare; at least one, so that a pool of one never makes below the
        # runner its next grading takes). Past that a grading would soon wait for them: on
        # this project's 2-core box, one slot grading the mix, every runner made at nice 19
        # left one grading in 22 starting its own on the spot (3 s), as the pool ran dry
        self.ahead_nice = ahead_nice()
        self.reserve = max(1, warm // 2)
        self._making: dict[RunnerProcess, int] = {}  # being prepared, and at which nice

    def _seed(self) -> None:
        """Make the slot's seed cache (graders.isolation.seed_cache); runners started from then on
        copy it instead of compiling the known-answer kernel."""
        # the runners' environment, with their GPU memory cap, and through the GPU's gate
        env = runner_env() | (cap_env(self.launcher.limits.gpu_memory_bytes)
                              if self.launcher.gpu_index is not None else {})
        cache = make_seed_cache(KNOWN_SHAPE, self.launcher.gpu_index, env, gate=self.gpu_gate)
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
        if self.warm:  # the runners' bytecode, compiled once (graders.isolation.bytecode)
            bytecode.begin()
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
        not_raised = False
        with self._cond:
            nice = self.ahead_nice if len(self._ready) >= self.reserve else RUNNER_NICE
        started: list[RunnerProcess] = []

        def note(process: RunnerProcess) -> None:
            started.append(process)
            with self._cond:
                # a grading may have taken the pool below its reserve since ``nice`` was
                # chosen (the shim takes a while to spawn): then it is wanted now
                wanted = nice != RUNNER_NICE and len(self._ready) < self.reserve
                self._making[process] = RUNNER_NICE if wanted else nice
            if wanted:
                self._raise([process])

        try:
            ready = prepare(self.device, self.launcher, self.gpu_gate, nice=nice,
                            on_started=note)
        except NotRaised as stop:
            log.warning("%s: this pool makes its runners at %d from now on", stop.message,
                        RUNNER_NICE)
            not_raised = True
            self.ahead_nice = RUNNER_NICE
        except RunStopped as stop:
            log.error("a warm runner failed to start: %s", stop.message)
            self._last_failure = stop.message
        with self._cond:
            for process in started:
                self._making.pop(process, None)
            self._preparing -= 1
            if ready is not None and not self._closed:
                self._ready.append(ready)
                self._failures = 0
            elif ready is None and not not_raised:
                self._failures += 1
            self._cond.notify_all()
        if ready is not None and self._closed:
            ready.process.close()
        if not_raised:
            self.fill()  # its replacement, at the runners' nice

    def take_ready(self, wait_s: float = 0.0) -> ReadyRunner | None:
        """A runner that is ready now or within ``wait_s``, or None; never starts one."""
        deadline = time.monotonic() + wait_s
        if wait_s > 0 and not self.ready_count:
            self._hurry()  # one being made is waited for
        with self._cond:
            while not self._ready and time.monotonic() < deadline:
                self._cond.wait(timeout=deadline - time.monotonic())
            ready = self._ready.pop(0) if self._ready else None
        if ready is not None:
            ready.phases = {"runner_start_s": 0.0, "known_answer_s": 0.0}  # done ahead
            self._hurry()
            self.fill()
        return ready

    def _hurry(self) -> None:
        """Once fewer than ``reserve`` runners are ready, those still being made below the
        runners' nice are raised to it: the next grading waits for them."""
        with self._cond:
            if len(self._ready) >= self.reserve:
                return
            slow = [p for p, nice in self._making.items() if nice != RUNNER_NICE]
            for process in slow:
                self._making[process] = RUNNER_NICE
        if slow:
            self._raise(slow)

    @staticmethod
    def _raise(processes: list[RunnerProcess]) -> None:
        """Raise ``processes`` to the runners' nice, off the caller's thread (a grading's:
        without CAP_SYS_ADMIN a session group's change may wait its turn for seconds). A
        runner closed meanwhile is left alone (RunnerProcess.set_priority)."""
        def run() -> None:
            for process in processes:
                process.set_priority(RUNNER_NICE)
        threading.Thread(target=run, daemon=True, name="runner-raise").start()

    def take(self) -> ReadyRunner:
        """A ready runner, or one prepared on the spot (raises RunStopped if it can't be)."""
        ready = self.take_ready()
        if ready is not None:
            return ready
        self._hurry()  # none was ready: any being made are wanted now
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

    def wait_filled(self, timeout_s: float = PREPARE_TIMEOUT_S) -> str:
        """Wait until every runner this pool keeps warm is ready, or none is still being
        prepared: "" once at least one is ready, else why none could be (``first_ready``'s
        answer). A slot's first grading takes several runners (one a lane); a worker that
        said ready after its first runner left that grading to start the rest itself,
        twice as slow as a warm one (issue 43)."""
        problem = self.first_ready(timeout_s)
        if problem:
            return problem
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while (len(self._ready) < self.warm and self._preparing
                   and time.monotonic() < deadline):
                self._cond.wait(timeout=max(0.0, deadline - time.monotonic()))
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
