"""Sharing a GPU between slots (issue 27): the GPU's gate holds across processes
(graders/isolation/pool.py GpuGate on a lock file), the server makes SLOTS_PER_GPU slots per GPU,
each its own worker process, and a slot that shares its GPU leaves the whole-GPU figures
out of its health check.

The gate is tested with real processes (fork). Nothing waits on a guess: each side says
what it saw through shared values, and a pause only gives a broken gate the chance to
show itself (a working one passes whatever the pause)."""

import multiprocessing
import threading
import time

import pytest

from graders.isolation.launch import CloseReport
from graders.isolation.pool import GpuGate
from graders.shared.vocabulary import Device

CTX = multiprocessing.get_context("fork")
WAIT_S = 30.0  # only a broken gate (or a hung process) runs into it
PAUSE_S = 0.3  # time for a gate that lets the second taker in wrongly to do so


@pytest.fixture
def lock_path(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADERS_GPU_LOCK_DIR", str(tmp_path / "locks"))
    gate = GpuGate.for_gpu(0, required=True)
    assert gate.lock_path == tmp_path / "locks" / "gpu0"
    assert (tmp_path / "locks").stat().st_mode & 0o777 == 0o700
    return gate.lock_path


class Taker:
    """A process that takes the gate (``mode``: shared or exclusive) and holds it until
    released; ``seen``: the other taker's ``inside`` flag as this one got in."""

    def __init__(self, path, mode, other: "Taker | None" = None):
        self.trying, self.entered, self.release = CTX.Event(), CTX.Event(), CTX.Event()
        self.inside, self.seen = CTX.Value("i", 0), CTX.Value("i", -1)
        other_inside = other.inside if other is not None else CTX.Value("i", 0)
        self.proc = CTX.Process(target=self._run, args=(path, mode, other_inside), daemon=True)
        self.proc.start()

    def _run(self, path, mode, other_inside) -> None:
        gate = GpuGate(path)
        self.trying.set()
        with getattr(gate, mode)():
            self.seen.value = other_inside.value
            self.inside.value = 1
            self.entered.set()
            self.release.wait(WAIT_S)
            self.inside.value = 0

    def finish(self) -> None:
        self.release.set()
        self.proc.join(WAIT_S)
        assert self.proc.exitcode == 0


@pytest.mark.parametrize("first, second", [("exclusive", "shared"), ("shared", "exclusive"),
                                           ("exclusive", "exclusive")])
def test_a_holder_in_one_process_keeps_out_a_conflicting_taker_in_another(lock_path, first,
                                                                          second):
    a = Taker(lock_path, first)
    assert a.entered.wait(WAIT_S)
    b = Taker(lock_path, second, other=a)
    assert b.trying.wait(WAIT_S)
    assert not b.entered.wait(PAUSE_S), f"{second} got in while {first} was held"
    a.finish()
    assert b.entered.wait(WAIT_S), f"{second} never got in after {first} was let go"
    assert b.seen.value == 0
    b.finish()


def test_shared_takers_in_two_processes_hold_the_gate_together(lock_path):
    a = Taker(lock_path, "shared")
    assert a.entered.wait(WAIT_S)
    b = Taker(lock_path, "shared", other=a)
    assert b.entered.wait(WAIT_S), "a second shared taker waited for the first"
    assert b.seen.value == 1
    a.finish()
    b.finish()


def _stream(path, n: int, count, going, handoff_s: float) -> None:
    """n shared holds in a row, each let go only once the next is in (or after
    ``handoff_s``): without writer preference the GPU is never free of them."""
    gate = GpuGate(path)
    entered = [threading.Event() for _ in range(n + 1)]

    def hold(i: int) -> None:
        with gate.shared():
            count.value = i + 1
            entered[i].set()
            entered[i + 1].wait(handoff_s)

    threads = []
    for i in range(n):
        threads.append(threading.Thread(target=hold, args=(i,)))
        threads[-1].start()
        entered[i].wait(WAIT_S)
        if i == 2:
            going.set()
        time.sleep(0.01)
    for t in threads:
        t.join()


def _exclusive_taker(path, count, going, asked_at, got_at) -> None:
    going.wait(WAIT_S)
    gate = GpuGate(path)
    asked_at.value = count.value
    with gate.exclusive():
        got_at.value = count.value


def test_a_waiting_exclusive_taker_is_not_starved_by_another_process_sharing(lock_path):
    n = 100
    count, going = CTX.Value("i", 0), CTX.Event()
    asked_at, got_at = CTX.Value("i", -1), CTX.Value("i", -1)
    stream = CTX.Process(target=_stream, args=(lock_path, n, count, going, 0.5), daemon=True)
    writer = CTX.Process(target=_exclusive_taker,
                         args=(lock_path, count, going, asked_at, got_at), daemon=True)
    stream.start()
    writer.start()
    writer.join(WAIT_S)
    stream.join(WAIT_S)
    assert writer.exitcode == 0 and stream.exitcode == 0
    # it got in while the stream still went on, a few holds after it asked, not at its end
    assert 0 <= asked_at.value <= got_at.value < n
    assert got_at.value - asked_at.value <= 20


def test_the_gate_keeps_its_writer_preference_within_a_process(lock_path):
    """A thread waiting for exclusive stops new shared takers of its own process too."""
    gate = GpuGate(lock_path)
    held, writer_waiting = threading.Event(), threading.Event()
    order = []

    def first_sharer():
        with gate.shared():
            held.set()
            writer_waiting.wait(WAIT_S)
            time.sleep(PAUSE_S)  # a late sharer that jumped the writer would be in by now
            order.append("first out")

    def writer():
        held.wait(WAIT_S)
        writer_waiting.set()
        with gate.exclusive():
            order.append("writer")

    def late_sharer():
        writer_waiting.wait(WAIT_S)
        while not gate._waiting_exclusive:  # noqa: SLF001 - the writer is queued
            time.sleep(0.001)
        with gate.shared():
            order.append("late sharer")

    threads = [threading.Thread(target=f) for f in (first_sharer, writer, late_sharer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert order == ["first out", "writer", "late sharer"]


def test_a_cpu_pool_and_an_unknown_gpu_have_no_lock_file(tmp_path, monkeypatch):
    from graders.isolation.pool import RunnerPool

    monkeypatch.setenv("GRADERS_GPU_LOCK_DIR", str(tmp_path / "locks"))
    assert GpuGate.for_gpu(None).lock_path is None

    class Launcher:
        gpu_index = 3

    assert RunnerPool(Device.CPU, Launcher()).gpu_gate.lock_path is None
    assert RunnerPool(Device.CUDA, Launcher()).gpu_gate.lock_path == tmp_path / "locks" / "gpu3"
    # a lock directory that cannot be made: in-process only, unless sharing needs it
    monkeypatch.setenv("GRADERS_GPU_LOCK_DIR", str(tmp_path / "a-file" / "locks"))
    (tmp_path / "a-file").write_text("")
    assert GpuGate.for_gpu(3).lock_path is None
    with pytest.raises(OSError):
        GpuGate.for_gpu(3, required=True)


# -- the server: slots per GPU, a worker process each ------------------------------------
def test_slots_per_gpu_makes_that_many_slots_on_each_gpu(monkeypatch):
    from server.core.settings import Settings
    from server.grading import local_pool as queue

    monkeypatch.setattr(queue, "visible_gpus", lambda: [0, 1])
    one = queue.default_slots(Settings(grader_device="auto", grading_slots=0, slots_per_gpu=1))
    assert [(s.name, s.gpu_index, s.shares_gpu) for s in one] == [("gpu-0", 0, False),
                                                                  ("gpu-1", 1, False)]
    two = queue.default_slots(Settings(grader_device="auto", grading_slots=0, slots_per_gpu=2))
    assert [(s.name, s.gpu_index, s.shares_gpu) for s in two] == [
        ("gpu-0", 0, True), ("gpu-0-1", 0, True), ("gpu-1", 1, True), ("gpu-1-1", 1, True)]
    # GRADING_SLOTS picks the GPUs (the load bench: one GPU), each keeps its slots
    first = queue.default_slots(Settings(grader_device="auto", grading_slots=1, slots_per_gpu=3))
    assert [s.name for s in first] == ["gpu-0", "gpu-0-1", "gpu-0-2"]
    # the CPU interpreter has no GPU to share
    monkeypatch.setattr(queue, "visible_gpus", lambda: [])
    cpu = queue.default_slots(Settings(grader_device="auto", grading_slots=0, slots_per_gpu=2))
    assert [(s.name, s.shares_gpu) for s in cpu] == [("cpu-0", False)]


def test_each_slot_of_a_shared_gpu_gets_its_own_worker_process(monkeypatch):
    from server.core.settings import Settings
    from server.grading.graders_client import GradersClient

    client = GradersClient(Settings(grader_command="", slots_per_gpu=2))
    first = client._worker("cuda", 0, "gpu-0", share_gpu=True)  # noqa: SLF001
    second = client._worker("cuda", 0, "gpu-0-1", share_gpu=True)  # noqa: SLF001
    assert first is not second and first.proc is None  # made, not started
    assert first.argv[-6:] == ["worker", "--device", "cuda", "--gpu-index", "0", "--share-gpu"]
    assert client._worker("cuda", 0, "gpu-0") is first  # noqa: SLF001 - one per slot
    alone = client._worker("cuda", 1, "gpu-1")  # noqa: SLF001
    assert "--share-gpu" not in alone.argv


def test_the_worker_command_takes_share_gpu(monkeypatch):
    from graders import cli
    from graders.service import worker

    seen = {}
    monkeypatch.setattr(worker, "run_worker", lambda *a, **k: seen.update(k) or 0)
    assert cli.main(["worker", "--device", "cuda", "--share-gpu"]) == 0
    assert seen == {"share_gpu": True}
    monkeypatch.setenv("GRADERS_SHARE_GPU", "1")
    assert worker.share_gpu_from_env()
    monkeypatch.setenv("GRADERS_SHARE_GPU", "0")
    assert not worker.share_gpu_from_env()


# -- a slot that shares its GPU ----------------------------------------------------------
@pytest.mark.parametrize("shares", [False, True])
def test_a_shared_slot_leaves_the_whole_gpu_figures_out_of_its_health(tmp_path, monkeypatch,
                                                                       shares):
    """The other slot's work on the GPU shows in its memory and utilization: a shared
    slot would be taken out of service for it. Its job's leftover processes still count."""
    from graders.service import slots

    monkeypatch.setenv("GRADERS_GPU_LOCK_DIR", str(tmp_path / "locks"))
    memory = iter([1000, 9000, 9000])  # the baseline, then the other slot's job
    monkeypatch.setattr(slots, "gpu_memory_used_mib", lambda index: next(memory, 9000))
    monkeypatch.setattr(slots, "gpu_utilization_percent", lambda index: 100)
    monkeypatch.setattr(slots, "GPU_MEMORY_SETTLE_S", 0.0)
    slot = slots.Slot("gpu-0", Device.CUDA, gpu_index=0, sandbox=False, shares_gpu=shares)
    try:
        assert slot.pool.gpu_gate.lock_path == tmp_path / "locks" / "gpu0"
        assert slot.check_health(CloseReport(0, True)) is shares
        if not shares:
            assert "above its baseline" in slot.problem and "busy" in slot.problem
            return
        assert slot.gpu_baseline_mib is None and slot.problem == ""
        assert slot.check_health(CloseReport(2, False)) is False
        assert slot.problem == "2 processes of the last job survive"
    finally:
        slot.close()
