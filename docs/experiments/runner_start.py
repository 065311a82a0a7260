"""What making one runner costs the host, step by step, in CPU-seconds (issue 43).

    python3 docs/experiments/runner_start.py [--device cuda|cpu] [--repeat N] [--no-sandbox]
                                             [--bytecode-only]

Starts runners one after another as a slot does (graders/isolation/pool.py ``prepare``: the
sandbox, hello, warm with Triton's key and the slot's seed cache, the known answer) and
reads, after each step, the CPU the runner's process tree has spent (its own processes'
user and system time, and their reaped children's: bwrap, the shim, ptxas). Then what a
bare python spends importing numpy, torch and triton, and whether the installed torch ships
its bytecode (a runner writes none: PYTHONDONTWRITEBYTECODE, a read-only environment).
The runners run twice: as they were made before graders/isolation/bytecode.py, then reading
the grader's compiled bytecode (its fill timed first); ``--bytecode-only``: the second alone.
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_breakdown import cpu_of  # noqa: E402

from graders.isolation import bytecode, triton_key  # noqa: E402
from graders.isolation.jobuids import descendants_of  # noqa: E402
from graders.isolation.launch import start_runner  # noqa: E402
from graders.isolation.pool import (CPU_SECONDS, KNOWN_SHAPE, PREPARE_TIMEOUT_S,  # noqa: E402
                                    RunnerPool, known_answer)
from graders.isolation.sandbox import default_launcher  # noqa: E402
from graders.isolation.session import Session  # noqa: E402
from graders.shared.vocabulary import Device  # noqa: E402

def tree_cpu(root: int) -> float:
    """CPU-seconds of ``root`` and its live descendants, with their reaped children's."""
    return sum(sum(cpu) for pid in descendants_of(root) if (cpu := cpu_of(pid)))


def one_runner(device: Device, launcher) -> dict[str, float]:
    steps: dict[str, float] = {}
    t0 = time.monotonic()
    runner = start_runner(device.value, CPU_SECONDS, launcher)
    runner.arm(PREPARE_TIMEOUT_S)
    session = Session(runner, PREPARE_TIMEOUT_S, launcher.limits, launcher.sandboxed)
    root = runner.proc.pid
    try:
        session.request({"op": "hello"}, during="hello", trusted=True)
        steps["hello (imports, device)"] = tree_cpu(root)
        session.request({"op": "warm", "known_shape": list(KNOWN_SHAPE),
                         "triton_key": triton_key.triton_key()}, during="warm", trusted=True)
        steps["warm"] = tree_cpu(root)
        known_answer(session, np.random.default_rng(secrets.randbits(64)))
        steps["known answer"] = tree_cpu(root)
        steps["wall"] = time.monotonic() - t0
    finally:
        runner.close()
    return steps


def bare_imports() -> str:
    program = ("import resource, time\n"
               "def c():\n r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime\n"
               "out = []\n"
               "for name in ('numpy', 'torch', 'triton'):\n"
               " __import__(name); out.append(f'{name} {c():.2f}')\n"
               "import torch, os\n"
               "d = os.path.dirname(torch.__file__); py = pyc = 0\n"
               "for _, _, files in os.walk(d):\n"
               " py += sum(f.endswith('.py') for f in files); pyc += sum(f.endswith('.pyc') for f in files)\n"
               "print('bare python, CPU-s cumulative:', ', '.join(out), f'| torch .py {py}, .pyc {pyc}')\n")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-I", "-c", program], capture_output=True,
                          text=True, env=env).stdout.strip()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--repeat", type=int, default=4)
    p.add_argument("--no-sandbox", action="store_true")
    p.add_argument("--bytecode-only", action="store_true")
    args = p.parse_args()
    device = Device(args.device)
    launcher = default_launcher(sandbox=not args.no_sandbox,
                                gpu_index=0 if device is Device.CUDA else None)
    if device is Device.CUDA:  # the slot's seed cache, as a slot makes it
        pool = RunnerPool(device, launcher, warm=1)
        pool.fill()
        print("seed cache:", pool.seed_cache())
        pool.close()
    triton_key.triton_key()
    print(bare_imports())
    started = time.monotonic()
    bytecode.begin()  # (the pool above began it too)
    where = bytecode.wait()
    print(f"bytecode folder {where}, ready in {time.monotonic() - started:.1f} s")
    if not args.bytecode_only:  # runners made as before it
        ready = bytecode.prefix
        bytecode.prefix = lambda: None
        run_runners("without the grader's bytecode", device, launcher, args.repeat)
        bytecode.prefix = ready
    if where is not None:
        run_runners("with it", device, launcher, args.repeat)


def run_runners(title: str, device: Device, launcher, repeat: int) -> None:
    print(title)
    for i in range(repeat):
        steps = one_runner(device, launcher)
        last, parts = 0.0, []
        for name, value in steps.items():
            if name == "wall":
                continue
            parts.append(f"{name} {value - last:.2f}")
            last = value
        print(f"  runner {i}: {last:.2f} CPU-s ({', '.join(parts)}), wall {steps['wall']:.2f} s")

if __name__ == "__main__":
    main()
