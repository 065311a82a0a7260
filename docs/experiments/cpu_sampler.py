"""A CPU sampler for one Python process, every thread (issue 43: where the worker's own
CPU-seconds go).

    python3 docs/experiments/cpu_sampler.py OUT.json -m graders worker --device cuda ...

runs the module after it as ``__main__`` with a thread that, every 10 ms, reads each other
thread's CPU clock (``time.pthread_getcpuclockid``) and charges what it used since the last
look to that thread's stack at this look (its innermost frames). The charges, summed by
stack and by leaf function, go to OUT.json every 5 s and when the process exits. A
statistical picture: the stack seen at a look stands for the 10 ms before it.

With ``GRADERS_CPU_SAMPLE=PREFIX`` and ``docs/experiments/sampling`` first on PYTHONPATH,
every Python process that is not isolated (``-I``: the runners are) samples itself into
PREFIX.PID.json (the server, its slots' workers, a bench).
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import runpy
import sys
import threading
import time

EVERY_S = 0.01
DUMP_EVERY_S = 5.0
DEPTH = 6


def _stack(frame) -> str:
    parts = []
    while frame is not None and len(parts) < DEPTH:
        code = frame.f_code
        where = code.co_filename.rsplit("/", 2)
        parts.append(f"{'/'.join(where[-2:])}:{frame.f_lineno}:{code.co_name}")
        frame = frame.f_back
    return " < ".join(parts)


def _leaf(frame) -> str:
    code = frame.f_code
    return f"{code.co_filename.rsplit('/', 2)[-1]}:{code.co_name}"


def start(out: str) -> None:
    by_stack: collections.Counter = collections.Counter()
    by_leaf: collections.Counter = collections.Counter()
    by_thread: collections.Counter = collections.Counter()
    seen: dict[int, float] = {}
    began = time.monotonic()

    def loop() -> None:
        me = threading.get_ident()
        last_dump = time.monotonic()
        while True:
            time.sleep(EVERY_S)
            if time.monotonic() - last_dump > DUMP_EVERY_S:  # a process killed keeps most
                last_dump = time.monotonic()
                dump()
            frames = sys._current_frames()
            for thread in threading.enumerate():
                ident = thread.ident
                if ident is None or ident == me or ident not in frames:
                    continue
                try:
                    cpu = time.clock_gettime(time.pthread_getcpuclockid(ident))
                except (OSError, ProcessLookupError):
                    continue
                used = cpu - seen.get(ident, cpu)
                seen[ident] = cpu
                if used <= 0:
                    continue
                frame = frames[ident]
                by_stack[_stack(frame)] += used
                by_leaf[_leaf(frame)] += used
                by_thread[thread.name.split("-")[0]] += used

    def dump() -> None:
        total = sum(by_thread.values())
        with open(out + ".tmp", "w") as fh:
            json.dump({"seconds": round(time.monotonic() - began, 1),
                       "cpu_s": round(total, 2),
                       "by_thread": {k: round(v, 3) for k, v in by_thread.most_common()},
                       "by_leaf": {k: round(v, 3) for k, v in by_leaf.most_common(40)},
                       "by_stack": {k: round(v, 3) for k, v in by_stack.most_common(60)}},
                      fh, indent=1)
        os.replace(out + ".tmp", out)

    threading.Thread(target=loop, daemon=True, name="cpu-sampler").start()
    atexit.register(dump)


def summary(paths: list[str], top: int = 25) -> None:
    """The samples of several processes (their files), summed: by thread, leaf, stack."""
    sums = {k: collections.Counter() for k in ("by_thread", "by_leaf", "by_stack")}
    total = 0.0
    for path in paths:
        d = json.load(open(path))
        total += d["cpu_s"]
        print(f"{path}: {d['cpu_s']} CPU-s over {d['seconds']} s; "
              + ", ".join(f"{k} {v}" for k, v in list(d["by_thread"].items())[:6]))
        for key, counter in sums.items():
            counter.update(d[key])
    print(f"all: {total:.1f} CPU-s")
    for key, counter in sums.items():
        print(f"-- {key}")
        for name, cpu in counter.most_common(top):
            print(f"{cpu:8.2f}  {name}")


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summary(sys.argv[2:])
        sys.exit(0)
    out, flag, module, *rest = sys.argv[1:]
    assert flag == "-m", "usage: cpu_sampler.py OUT.json -m MODULE ARGS..."
    start(out)
    sys.path[0] = ""  # as `python -m` has it: the working directory, not this folder
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
