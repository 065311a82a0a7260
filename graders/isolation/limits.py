"""What a runner may use (memory, processes, CPU, files, output). Below both the launcher
(graders/isolation/launch.py) and the sandboxes (graders/isolation/sandbox.py), which each import
it: neither imports the other for it (they imported each other before, issue 28)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 6 << 30  # host memory, via the job cgroup
    max_pids: int = 512  # tasks (threads count too: torch starts one per core)
    # processes (not threads) a job may have while a call runs; past it the job is killed at
    # once: a runner, its sandbox and a compiler or two need a handful (issue 26, item 10)
    max_processes: int = 64
    cpu_seconds_margin: int = 30  # RLIMIT_CPU = wall clock + this (threads add up)
    file_bytes: int = 64 << 20  # RLIMIT_FSIZE: largest file it may write
    tmp_bytes: int = 512 << 20  # size of its private /tmp
    output_keep_bytes: int = 64 << 10  # stdout+stderr kept for the report
    output_max_bytes: int = 8 << 20  # past this the runner is stopped: output_limit
    # GPU memory of one runner (graders/isolation/gpu_memory.py): set in the runner as torch's
    # per-process fraction, and held outside it to what the driver reports; 0: no cap
    gpu_memory_bytes: int = 0
