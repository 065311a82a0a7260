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


def test_the_probe_line_says_what_came_before_the_loop_and_the_reader_reads_it(capsys):
    began = time.perf_counter() - 0.25  # the request started a quarter second ago
    probe = timing._Probe(None, FakeEvent, record, None, began)
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
    fn, shape, reps, wall, late, host, gpu = m.groups()
    assert (fn, shape, reps, late) == ("softmax", "64×1048576 float32", "3", "1")
    host, gpu = reader.parts(host), reader.parts(gpu)
    assert host["setup"] >= 0.25 and set(host) >= {"setup", "warmup", "other", "fill", "call"}
    assert gpu == {"warmup": 1.0, "other": 3.0, "fill": 3.0, "call": 3.0}
    # and from a bench's --results file
    results = [{"result": {"output": line, "phases": {"timing_s": 1.0}}}]
    assert reader.results(json.loads(json.dumps(results)))[0]["output"] == line
