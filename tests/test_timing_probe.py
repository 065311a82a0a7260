"""The operator's timing probe (GRADERS_TIMING_PROBE=1): what the runner prints per timed
shape (graders/runner/timing.py ``_Probe``) is what docs/experiments/timing_probe.py reads,
the time before the loop (setup, the untimed warm-up calls) included. Stand-in events: no GPU."""

import importlib.util
import json
import time

from conftest import REPO

from graders.runner import timing


class FakeEvent:
    clock = 0.0

    def __init__(self, enable_timing=True):
        self.at = None


def record(event, stream):
    FakeEvent.clock += 1.0  # each part one GPU millisecond after the last
    event.at = FakeEvent.clock


def elapsed(a, b):
    return b.at - a.at


class FakeCuda:
    mallocs = 0

    @classmethod
    def memory_stats(cls):
        cls.mallocs += 2  # two trips to the driver between one reading and the next
        return {"num_device_alloc": cls.mallocs, "num_device_free": 0, "num_alloc_retries": 0}


class FakeTorch:
    cuda = FakeCuda


def test_the_probe_line_says_what_came_before_the_loop_and_the_reader_reads_it(capsys):
    began = time.perf_counter() - 0.25  # the request started a quarter second ago
    probe = timing._Probe(FakeTorch, FakeEvent, record, None, began, timing._costs(FakeTorch))
    probe.mark("warmup")
    for _ in range(3):
        probe.mark("other")
        probe.mark("fill")
        probe.mark("call")
    header = {"fn": "softmax", "inputs": [{"rows": 64, "cols": 1048576, "dtype": "float32"}]}
    probe.report(header, 3, 0.5, elapsed, 1)
    line = capsys.readouterr().err
    spec = importlib.util.spec_from_file_location(
        "timing_probe", REPO / "docs" / "experiments" / "timing_probe.py")
    reader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reader)
    (m,) = reader.LINE.finditer(line)
    fn, shape, reps, wall, late, host, gpu, counts = m.groups()
    assert (fn, shape, reps, late) == ("softmax", "64×1048576 float32", "3", "1")
    host, gpu, counts = reader.parts(host), reader.parts(gpu), reader.parts(counts)
    assert host["setup"] >= 0.25 and set(host) >= {"setup", "warmup", "other", "fill", "call"}
    assert gpu == {"warmup": 1.0, "other": 3.0, "fill": 3.0, "call": 3.0}
    # what the thread and the allocator spent meanwhile, and the slowest of the three fills
    assert counts["device_mallocs"] == 2 and counts["alloc_retries"] == 0
    assert counts["cpu_s"] >= 0 and counts["switches_forced"] >= 0
    assert 0 <= counts["fill_max_s"] <= host["fill"] + 0.001  # printed to the millisecond
    # and from a bench's --results file
    results = [{"result": {"output": line, "phases": {"timing_s": 1.0}}}]
    assert reader.results(json.loads(json.dumps(results)))[0]["output"] == line
