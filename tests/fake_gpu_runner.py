"""A stand-in for the runner on a GPU: right answers, and timings that may lie.

Used by tests/test_performance.py to show that the checker judges the timed run's
figures and rows itself. It computes the softmax in numpy (so the checks pass) and
answers the ``perf``/``perf_rows`` ops; MODE (argv[1]) picks the lie.
"""

import os
import sys

sys.path.insert(0, os.environ["GRADERS_REPO"])

import numpy as np  # noqa: E402

from graders.engine.casekit import softmax64  # noqa: E402
from graders.shared import perfinputs, protocol  # noqa: E402
from graders.shared.arrays import from_f64  # noqa: E402
from graders.shared.perfinputs import InputRecipe  # noqa: E402

COPY_MS = 0.100  # the copy of the same bytes takes 100 µs in every mode


def gate(what, inbox, outbox):
    protocol.send(outbox, {"gate": what})
    if what == "acquire":
        assert protocol.receive(inbox).header == {"gate": "held"}


def main():
    mode = sys.argv[1]
    fds = sys.argv[sys.argv.index("--fds") + 1]
    inbox, outbox = protocol.open_pair(*(int(x) for x in fds.split(",")))
    timed = None
    perf_runs = 0
    while True:
        try:
            msg = protocol.receive(inbox)
        except EOFError:
            return
        h, op = msg.header, msg.header["op"]
        if op == "hello":
            protocol.send(outbox, {"ok": True, "device": "cuda", "device_name": "Fake GPU"})
        elif op == "warm":
            if mode == "slow_warm":  # a compile and lazy imports that take a while
                import time
                time.sleep(3)
            protocol.send(outbox, {"ok": True})
        elif op == "known_answer":
            x = msg.arrays[0].to_f64()
            m = x.max(axis=1)
            lse = m + np.log(np.exp(x - m[:, None]).sum(axis=1))
            protocol.send(outbox, {"ok": True}, [from_f64(lse, "float32")])
        elif op == "load":
            protocol.send(outbox, {"ok": True, "attributes": {}})
        elif op == "call":
            if h.get("gate"):  # as graders.runner.gpu_gate asks: before its GPU work...
                gate("acquire", inbox, outbox)
                if mode == "endless_kernel":  # its kernel never ends
                    import time
                    time.sleep(60)
                if mode == "compiles":  # ...given back while a kernel compiles (0.4 s)
                    gate("release", inbox, outbox)
                    import time
                    time.sleep(0.4)
                    gate("acquire", inbox, outbox)
            x = msg.arrays[0]
            y = from_f64(softmax64(x.to_f64()), x.dtype)
            if mode in ("fails_checks", "fails_checks_slow_compiles"):  # rows not the softmax
                y = from_f64(np.full(x.shape, 1.0 / x.shape[1]), x.dtype)
            protocol.send(outbox, {"ok": True, "outputs": 1, "launches": 1}, [y, x])
        elif op == "perf":
            assert mode != "fails_checks", "a submission that failed a check was timed"
            timed = h
            reps = 12
            ms = {"too_fast": 0.080, "honest": 0.125}.get(mode, 0.125)
            perf_runs += 1
            if mode == "fast_once" and perf_runs == 1:  # one run whose copies were slowed
                ms = 0.080
            times = [ms * (1 + 0.001 * (i % 3)) for i in range(reps)]
            late = []
            if mode == "late_host":  # every other call queued late: the GPU waited 0.4 ms
                late = list(range(0, reps, 2))
                times = [t + 0.4 if i in late else t for i, t in enumerate(times)]
            recipes = [InputRecipe.from_json(d) for d in h["inputs"]]
            moved = sum(r.nbytes for r in recipes) + recipes[0].nbytes
            protocol.send(outbox, {
                "ok": True, "reps": reps, "ms": times, "copy_ms": [COPY_MS] * reps,
                "copy_bytes": moved, "launches": [1] * reps, "pool": 2,
                "violations": ["aten._softmax"] if mode == "torch_when_timed" else [],
                "foreign_streams": 1 if mode == "side_stream" else 0,
                **({"late_reps": late} if late else {})})
        elif op == "perf_rows":
            recipe = InputRecipe.from_json(timed["inputs"][0])
            seed = int(timed["seed"])
            rows = []
            for call, row in h["outputs"]:
                if mode == "replay":
                    call = 0  # every timed call answered with the first call's output
                x = perfinputs.host_rows(recipe, perfinputs.call_seed(seed, call, 0), [row])
                y = softmax64(x.to_f64())
                rows.append(from_f64(y[0], recipe.dtype))
            for call, j, row in h["inputs"]:
                x = perfinputs.host_rows(recipe, perfinputs.call_seed(seed, call, j), [row])
                data = x.data[0].copy()
                if mode == "mutates_input":
                    data[:] = 0
                rows.append(type(x)(data, x.dtype))
            protocol.send(outbox, {"ok": True, "rows": len(rows)}, rows)
        elif op == "perf_warmup":  # nothing to compile here
            if mode == "fails_checks_slow_compiles":  # each timed shape compiles 1.5 s
                import time
                time.sleep(1.5)
            if h.get("gate") and mode == "endless_when_timed":  # only the big shapes hang
                gate("acquire", inbox, outbox)
                import time
                time.sleep(60)
            protocol.send(outbox, {"ok": True, "warmed": True})
        elif op == "bye":
            return


main()
