"""Each job's GPU memory cap (issue 43; graders/isolation/gpu_memory.py,
graders/runner/memory_cap.py, graders/shared/gpu_sizing.py).

On the CPU: the cap's size, what the runner sets from it (a stand-in torch), that the launcher
hands it to the runner, the watch of what the driver reports (a stand-in nvidia-smi), whose an
out-of-memory is, the timing's larger cap, the worker's sizing and the seed cache through the
GPU's gate. On a GPU (``gpu``): a file that allocates past its cap fails `memory_limit` while a
good job beside it on the same GPU passes.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO
from graders.isolation import gpu_memory
from graders.isolation.launch import RunnerJob, RunnerProcess
from graders.isolation.limits import Limits
from graders.isolation.sandbox import DirectLauncher
from graders.isolation.session import RunStopped, Session
from graders.runner import memory_cap
from graders.shared import gpu_sizing, protocol
from graders.shared.gpu_sizing import GIB, MIB
from graders.shared.vocabulary import Device, Verdict

H200 = 143771 * MIB  # what nvidia-smi reports as the H200's memory.total


# -- the size ------------------------------------------------------------------------------
def test_the_cap_shares_the_gpu_among_the_runners_that_check_at_once():
    caps = {slots: gpu_sizing.size_cap(H200, slots) for slots in (1, 2, 4, 6)}
    assert caps[1] > caps[2] > caps[4] > caps[6] >= gpu_sizing.MIN_CAP_BYTES
    for slots, cap in caps.items():
        # every runner's cap, a context for every runner alive and one timing reserve fit
        # in the GPU less its margin: one job at its cap leaves every other its own
        alive = slots * gpu_sizing.runners_alive()
        held = slots * gpu_sizing.LANES * cap + alive * gpu_sizing.CONTEXT_BYTES + \
            gpu_sizing.TIMING_RESERVE_BYTES
        assert held <= H200 * (1 - gpu_sizing.MARGIN_FRACTION)
    assert 5 * GIB < caps[4] < 7 * GIB  # docs/deploy.md's worked figures
    # a GPU too small for its slots is overcommitted at the floor, never refused
    assert gpu_sizing.size_cap(16 * GIB, 6) == gpu_sizing.MIN_CAP_BYTES
    assert gpu_sizing.timing_cap(caps[4]) == caps[4] + gpu_sizing.TIMING_RESERVE_BYTES
    assert gpu_sizing.driver_limit(caps[4]) == caps[4] + gpu_sizing.CONTEXT_BYTES
    assert gpu_sizing.timing_cap(0) == gpu_sizing.driver_limit(0) == 0  # no cap stays none


def test_the_timing_reserve_holds_what_a_timing_keeps():
    """The runner's timing keeps up to KEEP_MAX_BYTES of outputs beside its flush buffer
    (graders/runner/timing.py, read without importing torch): the reserve holds both."""
    tree = ast.parse((REPO / "graders" / "runner" / "timing.py").read_text())
    sizes = {node.targets[0].id: eval(compile(ast.Expression(node.value), "", "eval"))
             for node in tree.body if isinstance(node, ast.Assign)
             and isinstance(node.targets[0], ast.Name)
             and node.targets[0].id in ("KEEP_MAX_BYTES", "FLUSH_MIN_BYTES")}
    assert sizes["KEEP_MAX_BYTES"] + sizes["FLUSH_MIN_BYTES"] < gpu_sizing.TIMING_RESERVE_BYTES


# -- the runner's own cap ----------------------------------------------------------------
class FakeCuda:
    def __init__(self, total: int):
        self.total, self.fractions, self.peak = total, [], 0

    def get_device_properties(self, index):
        return type("Props", (), {"total_memory": self.total})()

    def set_per_process_memory_fraction(self, fraction, device):
        self.fractions.append((fraction, device))

    def reset_peak_memory_stats(self, device):
        self.peak = 0

    def max_memory_reserved(self, device):
        return self.peak


def test_the_runner_sets_torchs_fraction_from_the_cap_it_was_given():
    assert memory_cap.cap_from_env({protocol.GPU_MEMORY_CAP_ENV: str(6 * GIB)}) == 6 * GIB
    assert memory_cap.cap_from_env({}) == 0
    assert memory_cap.cap_from_env({protocol.GPU_MEMORY_CAP_ENV: "lots"}) == 0
    assert memory_cap.fraction(0, H200) == 1.0 and memory_cap.fraction(10 * H200, H200) == 1.0

    torch = type("Torch", (), {"cuda": FakeCuda(H200)})()
    cap = memory_cap.MemoryCap(torch, 6 * GIB)
    assert cap.install() == {"cap": 6 * GIB, "total": H200}
    assert torch.cuda.fractions == [(6 * GIB / H200, 0)]
    torch.cuda.peak = 5 * GIB
    assert cap.peak() == 5 * GIB
    cap.reset_peak()
    assert cap.peak() == 0
    cap.install(gpu_sizing.timing_cap(6 * GIB))  # a timing's cap, then
    assert torch.cuda.fractions[-1][0] == pytest.approx(18 * GIB / H200)
    none = memory_cap.MemoryCap(torch, 0)
    assert none.install() == {} and none.peak() is None and len(torch.cuda.fractions) == 2


def test_the_launcher_hands_the_cap_to_a_gpu_runner_only(tmp_path):
    limits = Limits(gpu_memory_bytes=6 * GIB)
    launcher = DirectLauncher(gpu_index=0, limits=limits)

    def env_for(device):
        job = RunnerJob(python=sys.executable, device=device, fds=(0, 1), workdir=tmp_path,
                        env={})
        return launcher.command(job)[1]

    assert env_for("cuda")[protocol.GPU_MEMORY_CAP_ENV] == str(6 * GIB)
    assert protocol.GPU_MEMORY_CAP_ENV not in env_for("cpu")
    assert gpu_memory.cap_env(0) == {}


# -- the watch of what the driver reports --------------------------------------------------
def test_the_driver_figures_are_read_per_process_and_summed_per_job():
    rows = [["4242", "5000"], ["4243", "[N/A]"], ["17", "300"], ["4242", "24"]]
    apps = gpu_memory.parse_apps(rows)
    assert apps == {4242: 5024 * MIB, 17: 300 * MIB}
    assert gpu_memory.parse_apps(None) is None
    assert gpu_memory.job_usage(apps, [4242, 4243]) == 5024 * MIB
    # the driver names none of the job's processes (a container's pid namespace): unknown
    assert gpu_memory.job_usage(apps, [99]) is None and gpu_memory.job_usage(None, [1]) is None
    cap = 4 * GIB
    assert not gpu_memory.over_cap(cap + gpu_sizing.CONTEXT_BYTES, cap)  # a context beside
    assert gpu_memory.over_cap(cap + gpu_sizing.CONTEXT_BYTES + 1, cap)
    assert not gpu_memory.over_cap(None, cap) and not gpu_memory.over_cap(100 * GIB, 0)


class FakeNvml:
    """A stand-in for ``pynvml`` (nvidia-ml-py) on a GPU that holds ``apps``."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU, nvmlMemory_v2 = 1, 2, 0, 0x2000028

    class NVMLError(Exception):
        pass

    def __init__(self, apps, used, total, fails_init=False):
        self.apps, self.used, self.total, self.fails_init = apps, used, total, fails_init
        self.inits = self.readings = 0

    def nvmlInit(self):
        self.inits += 1
        if self.fails_init:
            raise self.NVMLError("NVML Shared Library Not Found")

    def nvmlDeviceGetHandleByIndex(self, index):
        if index != 0:
            raise self.NVMLError("Invalid Argument")
        return "gpu0"

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        self.readings += 1
        return [type("P", (), {"pid": pid, "usedGpuMemory": used})() for pid, used in self.apps]

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        assert version == self.nvmlMemory_v2  # the figures nvidia-smi reports (reserved apart)
        return type("M", (), {"used": self.used, "total": self.total})()

    def nvmlDeviceGetClockInfo(self, handle, which):
        return {1: 1980, 2: 3201}[which]

    def nvmlDeviceGetMaxClockInfo(self, handle, which):
        return {1: 1980, 2: 3201}[which]

    def nvmlDeviceGetPowerUsage(self, handle):
        return 123456  # mW

    def nvmlDeviceGetTemperature(self, handle, which):
        return 41


@pytest.fixture
def fake_nvml(monkeypatch):
    from graders.shared import nvml

    def install(fake):
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        nvml.forget()
        return fake
    yield install
    nvml.forget()


def test_the_driver_is_read_in_process_through_nvml_and_no_nvidia_smi_is_started(
        fake_nvml, monkeypatch):
    from graders.shared import gpuinfo

    def no_process(*args, **kwargs):
        raise AssertionError(f"a process was started to read the driver: {args[0]}")
    monkeypatch.setattr(subprocess, "run", no_process)
    fake = fake_nvml(FakeNvml([(4242, 5000 * MIB), (4243, None), (17, 300 * MIB),
                               (4242, 24 * MIB)], used=9 * GIB, total=H200))
    for _ in range(3):
        sample = gpu_memory.read_sample(0)
    # the same figures nvidia-smi's rows give (test above): per pid, summed; "[N/A]" left out
    assert sample.by_pid == {4242: 5024 * MIB, 17: 300 * MIB}
    assert (sample.used, sample.total, sample.free) == (9 * GIB, H200, H200 - 9 * GIB)
    assert gpu_memory.total_bytes(0) == H200
    assert fake.inits == 1 and fake.readings == 3  # initialised once per process
    # the clocks read at the end of every timing, in nvidia-smi's fields and units
    assert gpuinfo.clocks(0) == {"clocks.sm": "1980", "clocks.mem": "3201",
                                 "clocks.max.sm": "1980", "clocks.max.mem": "3201",
                                 "power.draw": "123.46", "temperature.gpu": "41"}


def test_without_nvml_or_when_it_fails_nvidia_smi_is_asked(fake_nvml, monkeypatch):
    asked = []

    def smi(args):
        asked.append(args[1])
        return [["4242", "5000"]] if "apps" in args[1] else [["9216", "143771"]]
    monkeypatch.setattr(gpu_memory, "_smi_rows", smi)
    fake_nvml(FakeNvml([], 0, H200, fails_init=True))  # no driver library
    assert gpu_memory.read_sample(0).by_pid == {4242: 5000 * MIB}
    assert len(asked) == 2
    fake_nvml(FakeNvml([(1, MIB)], MIB, H200))
    sample = gpu_memory.read_sample(1)  # NVML knows no GPU 1: nvidia-smi may
    assert sample.by_pid == {4242: 5000 * MIB} and sample.total == 143771 * MIB
    assert len(asked) == 4


@pytest.mark.parametrize("own, full, verdict", [
    (2 * GIB, True, "grader_error"),   # within its cap on a full GPU: another job's doing
    (9 * GIB, True, "memory_limit"),   # over its cap: its own
    (2 * GIB, False, "memory_limit"),  # the GPU had room: it asked for more than its share
    (None, True, "memory_limit"),      # nothing trusted clears it: as before the caps
])
def test_whose_out_of_memory_it_is(own, full, verdict):
    assert gpu_memory.oom_verdict(4 * GIB, own, full) == verdict
    assert gpu_memory.oom_verdict(0, own, full) == "memory_limit"  # no cap: as before


class FakeCgroup:
    """The job's processes, for the watch; killing is the launcher's process group's."""

    def __init__(self, pid: int):
        self._pids = [pid]

    def pids(self):
        return list(self._pids)

    def kill_all(self, wait_s=0):
        return True

    def oom_killed(self):
        return False


def _sleeping_runner(tmp_path: Path, cap: int) -> RunnerProcess:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)
    job = RunnerJob(python=sys.executable, device="cuda", fds=(0, 1), workdir=tmp_path, env={})
    launcher = DirectLauncher(gpu_index=0, limits=Limits(gpu_memory_bytes=cap))
    return RunnerProcess(proc=proc, to_runner=None, from_runner=None, workdir=None, job=job,
                         launcher=launcher, cgroup=FakeCgroup(proc.pid), max_processes=64,
                         gpu_cap=cap)


@pytest.fixture
def driver(monkeypatch):
    """A stand-in for nvidia-smi: the bytes each pid holds on the GPU, and its total."""
    held: dict[int, int] = {}
    monkeypatch.setattr(gpu_memory, "read_sample", lambda index: gpu_memory.Sample(
        time.monotonic(), dict(held), sum(held.values()), H200))
    monkeypatch.setattr(gpu_memory, "WATCH_EVERY_S", 0.2)
    gpu_memory.SAMPLES.forget()
    yield held
    gpu_memory.SAMPLES.forget()


def test_a_job_past_its_cap_by_the_drivers_count_is_killed_as_memory_limit(tmp_path, driver):
    """torch's fraction in the runner never sees the driver's own allocations: what the
    driver reports for the job is held to the cap from outside, while a call runs."""
    cap = 4 * GIB
    within, over = _sleeping_runner(tmp_path, cap), _sleeping_runner(tmp_path, cap)
    try:
        driver[within.proc.pid] = cap  # at its cap (and a context): left alone
        driver[over.proc.pid] = cap + 2 * GIB
        for runner in (within, over):
            runner.arm(60)
        deadline = time.monotonic() + 10
        while over.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert over.proc.poll() is not None and over.gpu_over == cap + 2 * GIB
        assert within.proc.poll() is None and within.gpu_over == 0
        death = Session(over, 60, Limits(), sandboxed=False)._death("in check big_rows")
        assert death.verdict is Verdict.MEMORY_LIMIT
        assert "held 6.0 GiB of GPU memory in check big_rows, over its cap of 4.6 GiB" in \
            death.message
    finally:
        for runner in (within, over):
            runner.disarm()
            runner.kill()
            runner.proc.wait()


class ScriptedRunner:
    """A runner that answers each request with the next reply of its script."""

    def __init__(self, replies, cap=4 * GIB, own=None):
        self.replies, self.sent = list(replies), []
        self.gpu_cap, self.gpu_index, self.own = cap, 0, own
        self.over_budget = self.killed_at_deadline = False

    def begin_call(self, budget_s):
        pass

    def end_call(self):
        pass

    def send(self, header, arrays=None):
        self.sent.append(header)

    def receive(self):
        return protocol.Message(self.replies.pop(0))

    def gpu_usage(self):
        return self.own


OOM = {"ok": False, "error": {"kind": "memory_limit", "line": 12,
                              "message": "OutOfMemoryError: CUDA out of memory."}}


def test_an_out_of_memory_on_a_full_gpu_within_the_cap_is_not_the_jobs(driver):
    driver[1] = H200  # another process holds the whole GPU
    innocent = Session(ScriptedRunner([OOM], own=1 * GIB), 60, Limits(), sandboxed=False)
    with pytest.raises(RunStopped) as stop:
        innocent.request({"op": "call"}, during="in check random_rows")
    assert stop.value.verdict is Verdict.GRADER_ERROR and "another job" in stop.value.message
    # the job that holds more than its cap is at fault on a full GPU too
    hog = Session(ScriptedRunner([OOM], own=9 * GIB), 60, Limits(), sandboxed=False)
    with pytest.raises(RunStopped) as stop:
        hog.request({"op": "call"}, during="in check random_rows")
    assert stop.value.verdict is Verdict.MEMORY_LIMIT and "line 12" in stop.value.message


def test_an_out_of_memory_with_room_on_the_gpu_is_the_jobs_own(driver):
    driver[1] = 10 * GIB
    session = Session(ScriptedRunner([OOM], own=1 * GIB), 60, Limits(), sandboxed=False)
    with pytest.raises(RunStopped) as stop:
        session.request({"op": "call"}, during="in check random_rows")
    assert stop.value.verdict is Verdict.MEMORY_LIMIT


def test_a_call_whose_torch_peak_is_past_the_cap_is_over_it_by_its_own_account():
    cap = 4 * GIB
    fine = {"ok": True, "gpu_peak": cap}
    lifted = {"ok": True, "gpu_peak": cap + 1 * GIB}  # it set its own fraction higher
    session = Session(ScriptedRunner([fine, lifted], cap=cap), 60, Limits(), sandboxed=False)
    assert session.request({"op": "call"}).header["gpu_peak"] == cap
    with pytest.raises(RunStopped) as stop:
        session.request({"op": "call"}, during="in check long_rows")
    assert stop.value.verdict is Verdict.MEMORY_LIMIT and "5.0 GiB" in stop.value.message


def test_the_runner_that_times_gets_the_gpus_timing_reserve_while_it_times():
    cap = 4 * GIB
    runner = ScriptedRunner([{"ok": True}, {"ok": True}, {"ok": True}], cap=cap)
    session = Session(runner, 60, Limits(), sandboxed=False)
    with session.timing_memory():
        assert runner.gpu_cap == gpu_sizing.timing_cap(cap)
        session.request({"op": "perf", "fn": "softmax"})
        session.request({"op": "perf_rows"})
    session.request({"op": "call"})
    assert [h.get("gpu_memory_cap") for h in runner.sent] == [gpu_sizing.timing_cap(cap)] * 2 \
        + [None]
    assert runner.gpu_cap == cap
    uncapped = ScriptedRunner([{"ok": True}], cap=0)
    with Session(uncapped, 60, Limits(), sandboxed=False).timing_memory():
        assert uncapped.gpu_cap == 0


# -- the worker's cap, and the seed cache through the gate ----------------------------------
def test_the_worker_sizes_the_cap_from_the_gpu_unless_told(monkeypatch):
    from graders.service import worker

    monkeypatch.delenv("GRADERS_GPU_SLOTS", raising=False)
    monkeypatch.delenv("GRADERS_GPU_MEMORY_CAP_MIB", raising=False)
    assert worker.gpu_slots(False) == 1 and worker.gpu_slots(True) == 2
    monkeypatch.setenv("GRADERS_GPU_SLOTS", "4")
    assert worker.gpu_slots(True) == 4 and worker.gpu_slots(True, given=6) == 6
    sized = worker.gpu_memory_cap(Device.CUDA, 0, 4, 9, total=H200)
    assert sized == gpu_sizing.size_cap(H200, 4, 4, 9)
    assert worker.gpu_memory_cap(Device.CUDA, 0, 4, 9, cap_mib=3000) == 3000 * MIB
    assert worker.gpu_memory_cap(Device.CUDA, 0, 4, 9, cap_mib=0, total=H200) == 0  # off
    monkeypatch.setenv("GRADERS_GPU_MEMORY_CAP_MIB", "2048")
    assert worker.gpu_memory_cap(Device.CUDA, 0, 4, 9, total=H200) == 2048 * MIB
    assert worker.gpu_memory_cap(Device.CPU, None, 1, 1, total=H200) == 0
    monkeypatch.delenv("GRADERS_GPU_MEMORY_CAP_MIB")
    monkeypatch.setattr(gpu_memory, "total_bytes", lambda index: None)  # no nvidia-smi
    assert worker.gpu_memory_cap(Device.CUDA, 0, 4, 9) == 0


def test_the_server_tells_each_gpu_worker_its_slots_and_a_set_cap():
    from server.core.settings import Settings
    from server.grading.graders_client import GradersClient

    client = GradersClient(Settings(grader_command="", slots_per_gpu=4))
    shared = client._worker("cuda", 0, "gpu-0-1", share_gpu=True, gpu_slots=4)  # noqa: SLF001
    assert shared.env == {"GRADERS_GPU_SLOTS": "4"}
    assert client._worker("cpu", None, "cpu-0").env == {}  # noqa: SLF001
    capped = GradersClient(Settings(grader_command="", gpu_memory_cap_mib=3000))
    assert capped._worker("cuda", 0, "gpu-0").env == {  # noqa: SLF001
        "GRADERS_GPU_SLOTS": "1", "GRADERS_GPU_MEMORY_CAP_MIB": "3000"}


class RecordingGate:
    def __init__(self):
        self.held = False

    def shared(self):
        gate = self

        class Held:
            def __enter__(self):
                gate.held = True

            def __exit__(self, *exc):
                gate.held = False

        return Held()


def test_the_seed_cache_is_built_through_the_gpus_gate_with_the_runners_cap(monkeypatch):
    from graders.isolation import pool, seed_cache

    gate, seen = RecordingGate(), {}

    def run(argv, env, **kwargs):
        seen.update(held=gate.held, env=env)
        return subprocess.CompletedProcess(argv, 1, "", "no GPU here")

    monkeypatch.setattr(seed_cache.subprocess, "run", run)
    assert seed_cache.make_seed_cache((5, 300), None, {"PATH": "/usr/bin"}, gate=gate) is None
    assert seen["held"] and not gate.held  # built inside the gate, which it then let go

    made = {}
    monkeypatch.setattr(pool, "make_seed_cache",
                        lambda shape, index, env, gate=None: made.update(env=env, gate=gate))
    launcher = DirectLauncher(gpu_index=0, limits=Limits(gpu_memory_bytes=6 * GIB))
    runners = pool.RunnerPool(Device.CUDA, launcher, warm=0, gate=gate)
    runners._seed()  # noqa: SLF001
    assert made["gate"] is gate
    assert made["env"][protocol.GPU_MEMORY_CAP_ENV] == str(6 * GIB)


# -- on the GPU: a hog beside a good job ------------------------------------------------
DRIVER_HOG = '''
import ctypes, time
import torch, triton, triton.language as tl

@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

_held = []

def softmax(x):
    # the driver's own allocations, which torch's fraction never sees
    cuda = ctypes.CDLL("libcuda.so.1")
    for _ in range(200):
        ptr = ctypes.c_uint64()
        if cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 30)) != 0:
            break
        _held.append(ptr.value)
        time.sleep(0.05)
    time.sleep(30)
    y = torch.empty_like(x)
    _copy[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
'''


@pytest.mark.gpu
@pytest.mark.parametrize("hog", ["torch", "driver"])
def test_a_job_past_its_cap_fails_memory_limit_and_the_job_beside_it_passes(tmp_path,
                                                                            monkeypatch, hog):
    """Two slots share GPU 0, each runner capped at 4 GiB: a file that allocates until
    the GPU is full (torch's allocator, or the driver's own calls) fails `memory_limit`
    alone, and the reference graded beside it at the same time passes."""
    from graders.engine.registry import get_exercise
    from graders.service.slots import Slot

    monkeypatch.setenv("GRADERS_GPU_LOCK_DIR", str(tmp_path / "locks"))
    limits = Limits(gpu_memory_bytes=4 * GIB)
    spec = get_exercise("safe_softmax")
    if hog == "torch":
        hostile = REPO / "graders" / "bench" / "mix" / "hostile" / "memory_hog.py"
    else:
        hostile = tmp_path / "driver_hog.py"
        hostile.write_text(DRIVER_HOG)
    good = REPO / "reference_solutions" / "safe_softmax" / "solution.py"
    slots = [Slot(f"gpu-0-{i}", Device.CUDA, gpu_index=0, limits=limits, warm=5,
                  shares_gpu=True) for i in range(2)]
    results = {}
    try:
        for slot in slots:
            assert slot.pool.first_ready() == ""

        def grade(name, slot, path):
            results[name] = slot.grade(spec, path, timeout_s=120)

        threads = [threading.Thread(target=grade, args=("hog", slots[0], hostile)),
                   threading.Thread(target=grade, args=("good", slots[1], good))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
    finally:
        for slot in slots:
            slot.close()
    assert results["hog"].verdict is Verdict.MEMORY_LIMIT, results["hog"].message
    good = results["good"]
    assert good.verdict is Verdict.PASSED, (good.message, good.output[-3000:],
                                            {k: v for k, v in good.phases.items()
                                             if k != "timeline"})
    assert good.performance.get("points", 0) > 0


@pytest.mark.gpu
def test_nvml_in_process_reads_what_nvidia_smi_reads(tmp_path):
    """The in-process reading (graders/shared/nvml.py) against nvidia-smi's, of a process
    holding 1 GiB on GPU 0: the same pid, the same MiB, the same GPU total and max clocks."""
    from graders.shared import gpuinfo, nvml

    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time, torch; x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda'); "
        "torch.cuda.synchronize(); print('ready', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        nvml.forget()
        apps = nvml.compute_apps(0)
        assert apps is not None, "NVML did not load on the GPU machine"
        smi = gpu_memory.parse_apps(gpu_memory._smi_rows(
            ["--id=0", "--query-compute-apps=pid,used_memory"]))
        assert holder.pid in apps and holder.pid in smi
        assert abs(apps[holder.pid] - smi[holder.pid]) <= MIB  # nvidia-smi rounds to MiB
        assert apps[holder.pid] >= GIB
        total = gpu_memory._smi_rows(["--id=0", "--query-gpu=memory.total"])[0][0]
        assert nvml.memory(0)[1] // MIB == int(total)
        by_nvml = gpuinfo.clocks(0)
        nvml.forget()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(nvml, "clocks", lambda index: None)
            by_smi = gpuinfo.clocks(0)
        assert set(by_nvml) == set(by_smi)
        assert by_nvml["clocks.max.sm"] == by_smi["clocks.max.sm"]
        assert by_nvml["clocks.max.mem"] == by_smi["clocks.max.mem"]
    finally:
        holder.kill()
        holder.wait()
