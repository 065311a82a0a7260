"""Slots per GPU sized from the host (issue 43; graders/shared/gpu_sizing.py,
server/grading/slot_sizing.py): from its CPU cores and its GPUs' memory, where SLOTS_PER_GPU
does not say; an explicit SLOTS_PER_GPU always wins. docs/deploy.md writes out the arithmetic
these figures follow."""

from __future__ import annotations

import pytest

from graders.shared import gpu_sizing
from graders.shared.gpu_sizing import GIB, MIB

H200 = 143771 * MIB  # nvidia-smi's memory.total of the H200


def test_cores_give_a_slot_per_four_cores_of_each_gpu():
    assert gpu_sizing.slots_by_cores(16, 1) == 4  # the H200 host
    assert gpu_sizing.slots_by_cores(16, 2) == 2  # two GPUs share the cores
    assert gpu_sizing.slots_by_cores(2, 1) == 1  # this machine: never none
    assert gpu_sizing.slots_by_cores(128, 8) == 4


def test_memory_gives_each_slots_runners_a_context_and_room_to_check():
    assert gpu_sizing.slots_by_memory(H200) == 7
    assert gpu_sizing.slots_by_memory(80 * GIB) == 3
    assert gpu_sizing.slots_by_memory(24 * GIB) == 1  # never none
    # what it allows fits: contexts, each checking runner's least share, one timing
    for total in (H200, 80 * GIB):
        slots = gpu_sizing.slots_by_memory(total)
        per_slot = gpu_sizing.runners_alive() * gpu_sizing.CONTEXT_BYTES + \
            gpu_sizing.LANES * gpu_sizing.SLOT_MIN_CAP_BYTES
        assert slots * per_slot + gpu_sizing.TIMING_RESERVE_BYTES <= total * (
            1 - gpu_sizing.MARGIN_FRACTION)
        assert gpu_sizing.size_cap(total, slots) >= gpu_sizing.SLOT_MIN_CAP_BYTES


def test_a_host_gets_the_fewest_its_cores_and_its_gpu_allow():
    assert gpu_sizing.slots_per_gpu(16, 1, H200) == 4  # cores bind: the H200 host
    assert gpu_sizing.slots_per_gpu(16, 1, 80 * GIB) == 3  # memory binds: an H100 host
    assert gpu_sizing.slots_per_gpu(64, 1, H200) == 7  # memory binds
    assert gpu_sizing.slots_per_gpu(64, 1, None) == gpu_sizing.MAX_SLOTS_PER_GPU  # unknown
    assert gpu_sizing.slots_per_gpu(1, 1, 8 * GIB) == 1


@pytest.fixture
def host(monkeypatch):
    """The server's view of a host: its GPUs, cores and GPU memory, all stand-ins."""
    from server.grading import local_pool, slot_sizing

    monkeypatch.setattr(local_pool, "visible_gpus", lambda: [0])
    monkeypatch.setattr(slot_sizing, "cpu_cores", lambda: 16)
    monkeypatch.setattr(slot_sizing, "gpu_memory_bytes", lambda gpus: H200)
    return local_pool


def test_unset_slots_per_gpu_is_sized_from_the_host(host):
    from server.core.settings import Settings

    slots = host.default_slots(Settings(grader_device="auto", grading_slots=0))
    assert [(s.name, s.gpu_index, s.shares_gpu, s.gpu_slots) for s in slots] == [
        ("gpu-0", 0, True, 4), ("gpu-0-1", 0, True, 4), ("gpu-0-2", 0, True, 4),
        ("gpu-0-3", 0, True, 4)]


def test_an_explicit_slots_per_gpu_wins(host, monkeypatch):
    from server.core.settings import Settings
    from server.grading import local_pool

    def never(gpus):
        raise AssertionError("sized although SLOTS_PER_GPU was set")

    monkeypatch.setattr(local_pool, "sized_slots_per_gpu", never)
    one = host.default_slots(Settings(grader_device="auto", grading_slots=0, slots_per_gpu=1))
    assert [(s.name, s.shares_gpu, s.gpu_slots) for s in one] == [("gpu-0", False, 1)]
    monkeypatch.setenv("SLOTS_PER_GPU", "6")  # from the environment, as a deployment sets it
    assert len(host.default_slots(Settings(grader_device="auto", grading_slots=0))) == 6
    # the CPU interpreter is not sized by GPUs at all
    cpu = host.default_slots(Settings(grader_device="cpu", grading_slots=2))
    assert [s.name for s in cpu] == ["cpu-0", "cpu-1"]


def test_the_host_is_read_without_torch(monkeypatch):
    from server.grading import slot_sizing

    assert slot_sizing.cpu_cores() >= 1
    monkeypatch.setattr(slot_sizing.shutil, "which", lambda name: None)  # no nvidia-smi
    assert slot_sizing.gpu_memory_bytes([0]) is None
    # then the cores alone decide
    assert slot_sizing.sized_slots_per_gpu([0], cores=16) == 4
    assert slot_sizing.sized_slots_per_gpu([0, 1], cores=16, gpu_bytes=H200) == 2
