"""Where a host's CPU-seconds go while a command runs (issue 43): the load bench's burst.

    python3 docs/experiments/host_cpu.py --out FILE.json -- python3 -m graders bench --load ...

cpu_breakdown.py counts one worker's gradings one at a time (15.5 CPU-seconds a grading at
2 lanes on an H100); under a burst of 48 on 6 slots the load average stays above the 16
cores for ~87 s, up to ~29 a grading if every core was busy. This runs the command and meanwhile reads /proc every 0.1 s: every runner (a
python whose command line carries ``--fds``) by its pid, split into what making it cost
(its CPU when it first stood still, ready in its pool: cpu_breakdown's rule) and its
work, with its reaped children apart (ptxas and gcc: the compiles; a hostile file's
forks); the slots' worker processes (the trusted checkers), the server, and the command
itself; the rest is the host's busy time (/proc/stat) less all of them. Run it on a host
that does nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_breakdown import _at, _made, cpu_of  # noqa: E402
from lanes_cost import busy_seconds  # noqa: E402

PERIOD_S = 0.1
# what a process is, from its command line (the first that matches)
KINDS = (("runner", (b"--fds",)), ("worker", (b"graders", b"worker")),
         ("server", (b"-m", b"server")), ("server", (b"uvicorn",)))


def kind_of(argv: list[bytes]) -> str | None:
    if not argv or any(b"os.execvp" in a for a in argv):
        return None  # the shim before it execs (bwrap, or the runner itself)
    if b"python" not in os.path.basename(argv[0]):
        return None
    for kind, words in KINDS:
        if all(any(w == a or (len(w) > 2 and w in a) for a in argv) for w in words):
            return kind
    return None


class HostSampler(threading.Thread):
    """Every PERIOD_S: (time, own CPU-s, reaped children's CPU-s) of each process of a known
    kind, and the command's own."""

    def __init__(self, command_pid: int):
        super().__init__(daemon=True)
        self.command_pid = command_pid
        self.kinds: dict[int, str | None] = {}
        self.series: dict[int, list[tuple[float, float, float]]] = {}
        self.stop = threading.Event()

    def _kind(self, pid: int) -> str | None:
        if pid not in self.kinds:
            if pid == self.command_pid:
                self.kinds[pid] = "command"
            else:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as fh:
                        argv = fh.read().split(b"\0")
                except OSError:
                    return None
                self.kinds[pid] = kind_of([a for a in argv if a])
        return self.kinds[pid]

    def run(self) -> None:
        while not self.stop.wait(PERIOD_S):
            now = time.monotonic()
            for name in os.listdir("/proc"):
                if name.isdigit() and self._kind(int(name)):
                    got = cpu_of(int(name))
                    if got:
                        self.series.setdefault(int(name), []).append((now, *got))


def summarize(sampler: HostSampler, busy_s: float, wall_s: float,
              t0: float) -> dict[str, float | int]:
    """CPU-seconds by kind from ``t0`` on. A process alive at ``t0`` counts from its sample
    then; a runner made after it is split into making and work."""
    out = {"host_busy": busy_s, "wall": wall_s, "runners_made": 0.0, "runners_work": 0.0,
           "runners_children": 0.0}
    made = 0
    for pid, s in sampler.series.items():
        kind = sampler.kinds[pid]
        alive = s[0][0] <= t0 + PERIOD_S  # sampled at the window's start
        first = _at(s, t0) if alive else (0.0, 0.0, 0.0)
        own, kids = s[-1][1] - first[1], s[-1][2] - first[2]
        if kind != "runner":  # own CPU only: its reaped children are the runners, the
            out[kind] = out.get(kind, 0.0) + own  # server's workers, counted themselves
            continue
        cost = 0.0
        if not alive:  # made in the window: what it took to stand ready
            made += 1
            cost = _made(s) or own + kids
        out["runners_made"] += cost
        out["runners_work"] += own + kids - cost
        out["runners_children"] += kids  # of either: its compiles, a file's own forks
    counted = sum(out.get(k, 0.0) for k in ("runners_made", "runners_work", "worker", "server",
                                            "command"))
    out["rest"] = busy_s - counted
    result: dict[str, float | int] = {k: round(v, 1) for k, v in out.items()}
    result["runners_made_count"] = made
    result["cores_busy"] = round(busy_s / wall_s, 1) if wall_s else 0.0
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path)
    p.add_argument("--gradings", type=int, help="divide by this too (the burst's size)")
    p.add_argument("--from-line", default="",
                   help="the window opens at the command's first output line holding this "
                        "(the load bench's first progress line: its server and warm runners "
                        "made before are left out); by default at the command's start")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command to run")
    window = {"b0": busy_seconds(), "t0": time.monotonic()}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1)
    sampler = HostSampler(proc.pid)
    sampler.start()
    opened = not args.from_line
    for line in proc.stdout:
        sys.stdout.write(line)
        if not opened and args.from_line in line:
            opened = True
            window.update(b0=busy_seconds(), t0=time.monotonic())
    rc = proc.wait()
    wall, busy = time.monotonic() - window["t0"], busy_seconds() - window["b0"]
    sampler.stop.set()
    sampler.join()
    summary = summarize(sampler, busy, wall, window["t0"])
    if args.gradings:
        summary["per_grading"] = {k: round(v / args.gradings, 2) for k, v in summary.items()
                                  if isinstance(v, float) and k not in ("wall", "cores_busy")}
    print("host CPU-seconds by kind: " + json.dumps(summary), flush=True)
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1))
    return rc


if __name__ == "__main__":
    sys.exit(main())
