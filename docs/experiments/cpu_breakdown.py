"""Where a grading's CPU-seconds go (issue 43): runners made, runners' work, the checker.

    python3 docs/experiments/cpu_breakdown.py --lanes 2 --repeat 6 --out FILE.json

Starts ``python -m graders worker --lanes L`` as lanes_cost.py does, sends the three
references one at a time, waits for the pool to be refilled, and meanwhile reads /proc
every 50 ms. Each runner (a python whose command line carries ``--fds``) is followed by
its pid: its own CPU time and its reaped children's (ptxas, gcc: the compiles). A runner's
CPU when it first goes quiet (ready in the pool) is what making it cost; the rest is its
grading work. The worker's own CPU (its threads: the checks' inputs, float64 answers and
judging) is counted apart, and whatever else the host did is the remainder of /proc/stat.

Every runner on the host is counted, and the host's busy time is all of it: run it on a host
that does nothing else. It also times what a runner's start is made of, each in a fresh process: python alone,
``import torch``, ``import torch, triton``, and a first CUDA tensor.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lanes_cost import busy_seconds, grade_reference, idle_busy_rate  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
QUIET_S = 0.4  # a runner whose CPU stands still this long is waiting (ready, or idle)


def cpu_of(pid: int) -> tuple[float, float] | None:
    """(own CPU-s, reaped children's CPU-s) of a live process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # after the name: state(0) ... utime(11) stime(12) cutime(13) cstime(14)
    return (int(fields[11]) + int(fields[12])) / TICK, (int(fields[13]) + int(fields[14])) / TICK


class Sampler(threading.Thread):
    def __init__(self, worker_pid: int):
        super().__init__(daemon=True)
        self.worker_pid = worker_pid
        self.known: dict[int, bool] = {}  # pid -> is a runner
        self.series: dict[int, list[tuple[float, float, float]]] = {}
        self.worker: list[tuple[float, float]] = []
        self.stop = threading.Event()

    def _is_runner(self, pid: int) -> bool:
        if pid not in self.known:
            try:
                argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            except OSError:
                argv = []
            if any(b"os.execvp" in a for a in argv):
                return False  # the shim before it execs (bwrap, or the runner itself)
            self.known[pid] = bool(argv) and b"python" in os.path.basename(argv[0]) \
                and b"--fds" in argv
        return self.known[pid]

    def run(self) -> None:
        while not self.stop.wait(0.05):
            now = time.monotonic()
            own = cpu_of(self.worker_pid)
            if own:
                self.worker.append((now, own[0]))
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                pid = int(name)
                if not self._is_runner(pid):
                    continue
                got = cpu_of(pid)
                if got:
                    self.series.setdefault(pid, []).append((now, *got))


def _at(series: list[tuple[float, float, float]], when: float) -> tuple[float, float, float]:
    """The last sample at or before ``when`` (the first one if none)."""
    before = [x for x in series if x[0] <= when]
    return before[-1] if before else series[0]


def _made(series: list[tuple[float, float, float]]) -> float | None:
    """What making a runner cost: its CPU when it first stood still, past 1 s of CPU,
    for QUIET_S (ready in the pool); None if it never did."""
    for i, (t, own, kids) in enumerate(series):
        if own + kids < 1.0:
            continue
        later = [x for x in series[i:] if x[0] - t <= QUIET_S + 0.06]
        if later[-1][0] - t >= QUIET_S and later[-1][1] + later[-1][2] == own + kids:
            return own + kids
    return None


def stage_costs(device: str) -> dict[str, float]:
    """CPU-seconds of a fresh python that goes as far as each stage of a runner's start."""
    stages = {
        "python": "pass",
        "import torch": "import torch",
        "import torch, triton": "import torch, triton",
        "+ first CUDA tensor": "import torch, triton; torch.zeros(1, device='cuda'); "
                               "torch.cuda.synchronize()",
    }
    if device != "cuda":
        del stages["+ first CUDA tensor"]
    costs = {}
    for name, code in stages.items():
        best = None
        for _ in range(3):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([sys.executable, "-c", code], check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            best = cpu if best is None else min(best, cpu)
        costs[name] = round(best, 2)
    return costs


def one_config(lanes: int, repeat: int, refill_s: float, device: str,
               sample_to: Path | None = None) -> dict:
    # the worker under docs/experiments/cpu_sampler.py: its threads' CPU by stack
    sampled = [str(Path(__file__).resolve().parent / "cpu_sampler.py"),
               str(sample_to.with_suffix(f".lanes{lanes}.json"))] if sample_to else []
    worker = subprocess.Popen([sys.executable, *sampled, "-m", "graders", "worker", "--device", device,
                               "--lanes", str(lanes)], cwd=REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, bufsize=1)
    sampler = Sampler(worker.pid)
    sampler.start()
    json.loads(worker.stdout.readline())
    idle_rate = idle_busy_rate(settle_s=3.0)
    start_pids = set(sampler.series)
    w0 = sampler.worker[-1][1]
    b0, t0 = busy_seconds(), time.monotonic()
    walls = []
    for i in range(repeat):
        exercise, wall_s, result = grade_reference(worker, i)
        walls.append(wall_s)
        print(f"lanes {lanes} {exercise:<15} {result.get('verdict')!s:<8} {walls[-1]:6.2f} s "
              f"runners {(result.get('phases') or {}).get('runners')}", flush=True)
    time.sleep(refill_s)
    window = time.monotonic() - t0
    host = busy_seconds() - b0 - idle_rate * window
    worker_cpu = sampler.worker[-1][1] - w0
    worker.stdin.close()
    worker.wait(timeout=120)
    sampler.stop.set()
    sampler.join()
    made, work, kids = [], 0.0, 0.0
    for pid, s in sampler.series.items():
        if s[-1][0] < t0:
            continue  # gone before the window
        total = s[-1][1] + s[-1][2]
        kids += s[-1][2] - (_at(s, t0)[2] if pid in start_pids else 0.0)
        if pid in start_pids:  # made before the window: only its work counts in it
            work += total - sum(_at(s, t0)[1:])
        else:
            cost = _made(s)
            made.append(cost if cost is not None else total)
            work += total - made[-1]
    made_total = sum(made)
    summary = {
        "lanes": lanes, "gradings": repeat, "p50_s": statistics.median(walls),
        "host_cpu_s_per_grading": round(host / repeat, 2),
        "runners_made_in_window": len(made),
        "runner_made_cpu_s_median": round(statistics.median(made), 2) if made else None,
        "runners_made_cpu_s_per_grading": round(made_total / repeat, 2),
        "runners_work_cpu_s_per_grading": round(work / repeat, 2),
        "of_which_children_compilers_cpu_s_per_grading": round(kids / repeat, 2),
        "worker_cpu_s_per_grading": round(worker_cpu / repeat, 2),
        "rest_cpu_s_per_grading": round((host - made_total - work - worker_cpu) / repeat, 2),
    }
    print(json.dumps(summary), flush=True)
    return {"summary": summary, "walls": walls, "runners": {str(k): v[-1] for k, v in sampler.series.items()}}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--lanes", type=int, nargs="+", default=[2])
    p.add_argument("--repeat", type=int, default=6)
    p.add_argument("--refill-s", type=float, default=15.0)
    p.add_argument("--device", default="cuda")
    p.add_argument("--sample-worker", type=Path, help="where the worker's CPU samples go "
                   "(one FILE.lanesL.json a lane count)")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    stages = stage_costs(args.device)
    print("runner start, by stage (CPU-s, fresh process each):", json.dumps(stages), flush=True)
    runs = [one_config(n, args.repeat, args.refill_s, args.device, args.sample_worker) for n in args.lanes]
    if args.out:
        args.out.write_text(json.dumps({"stages": stages, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
