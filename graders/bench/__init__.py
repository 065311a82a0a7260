"""``python -m graders bench``: the numbers behind "honest on speed", measured on this GPU.

1. Every exercise's graded shapes: the copy ceiling, torch's own answer
   (``exercises/<name>/baseline.py``, timed in this process with the same method), and the
   reference solution graded for real (sandboxed runner, ``graders.engine.performance``).
2. The module's traffic table: the four lab kernels and unfused vs fused
   scale + mask + softmax at 4096×4096 float32, measured time ratios beside the
   predicted byte ratios.
3. Repeatability: one reference graded N times on one GPU, its fractions' range.
4. Latency: wall time of each grading (runner start to stored result).
Prints the tables and writes them, with device, date and versions, as markdown.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.util
import statistics
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

from graders.engine.registry import all_exercises, references_root
from graders.engine.spec import PerfShape
from graders.shared.perfinputs import InputRecipe
from graders.shared.vocabulary import Device

# The best public kernel per shape, fraction of copy, from ../shared/FACTS.md (same
# H200 model, 2026-11-29): Triton tutorial, Liger, FlagGems, attorch; None = not measured.
PUBLIC_PEERS = {
    ("safe_softmax", "4096×4096 float32"): (0.99, "attorch"),
    ("safe_softmax", "4096×4096 bfloat16"): (1.01, "Liger"),
    ("safe_softmax", "32768×1024 float32"): (1.00, "best public"),
    ("safe_softmax", "32768×1024 bfloat16"): (0.99, "best public"),
    ("safe_softmax", "65536×256 float32"): (0.82, "attorch"),
    ("safe_softmax", "65536×256 bfloat16"): (0.47, "FlagGems"),
    ("safe_softmax", "1024×32768 float32"): (0.91, "best public"),
    ("safe_softmax", "1024×32768 bfloat16"): (0.73, "best public"),
    ("online_softmax", "256×262144 float32"): (0.63, "FlagGems"),
    ("online_softmax", "64×1048576 float32"): (0.35, "FlagGems"),
}


NOTES_MARKER = "<!-- notes: kept by `graders bench` -->"


class _InProcess:
    """Just enough of a runner for graders.runner.timing to time trusted code here."""

    def __init__(self, torch, name: str, fn):
        from graders.runner import guard

        self.torch, self.guard, self.submission = torch, guard, "<bench>"
        self.module = SimpleNamespace(**{name: fn})
        from graders.runner.timing import clock

        self.clock = clock(torch)


def time_in_process(torch, fn, shape: PerfShape, seed: int = 1) -> dict:
    """Trusted code timed here, by the runner's method, judged by the checker's figures."""
    from graders.engine.performance import figures, timing_request
    from graders.runner import timing
    from graders.runner.main import _decode

    reply, run = timing.measure(_InProcess(torch, shape.fn, fn), timing_request(shape, seed),
                                _decode, guarded=False)
    del run
    torch.cuda.empty_cache()
    return dataclasses.asdict(figures(shape, reply["ms"], reply["copy_ms"], reply["copy_bytes"]))


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"bench_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _grade_reference(exercise, gpu_index: int, sandbox: bool):
    from graders.service.slots import Slot

    slot = Slot("bench", Device.CUDA, gpu_index=gpu_index, sandbox=sandbox)
    path = references_root() / exercise.name / "solution.py"
    started = time.monotonic()
    result = slot.grade(exercise, path, performance=True)
    return result, time.monotonic() - started


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:.1f}%"


def run_bench(out: Path | None, repeat: int, gpu_index: int, sandbox: bool,
              only: list[str] | None = None, skip_labs: bool = False) -> int:
    import torch
    import triton

    if not torch.cuda.is_available():
        print("bench needs an NVIDIA GPU", file=sys.stderr)
        return 2
    torch.cuda.set_device(0)
    device = torch.cuda.get_device_name()
    md = ["# Benchmarks\n",
          f"Measured by `python -m graders bench` on {device}, "
          f"{datetime.date.today().isoformat()}; torch {torch.__version__}, triton "
          f"{triton.__version__}, CUDA {torch.version.cuda}, Python {sys.version.split()[0]}.\n"]
    from graders.engine.performance import METHOD
    md.append(f"Method (docs/timing.md): {METHOD}. GB/s = those bytes ÷ the median time. "
              "Spread = interquartile range ÷ median of the per-call times.\n")
    latencies: list[float] = []

    from graders.shared import gpuinfo
    clocks = gpuinfo.clocks(gpu_index)
    if clocks:
        md.append("Clocks at the start (nvidia-smi, MHz / W / °C): " +
                  ", ".join(f"{k} {v}" for k, v in clocks.items()) + ".\n")

    # a hand-written part after NOTES_MARKER in an existing file survives a new run
    notes = ""
    if out and out.exists() and NOTES_MARKER in out.read_text():
        notes = out.read_text().split(NOTES_MARKER, 1)[1]

    def save() -> None:
        if out:
            out.write_text("\n".join(md) + "\n" + (NOTES_MARKER + notes if notes else ""))

    repeats = max(1, repeat)  # the first timed exercise is graded this often
    # the exercise with the most graded shapes first: it is the one graded `repeat` times
    for exercise in sorted(all_exercises().values(),
                           key=lambda e: -len(e.performance.shapes) if e.performance else 0):
        if exercise.performance is None or (only and exercise.name not in only):
            continue
        try:
            repeats = _exercise_tables(torch, exercise, repeats, gpu_index, sandbox, md,
                                       latencies)
        except Exception:  # noqa: BLE001 - one broken section must not lose the others
            md.append(f"\n{exercise.name}: the bench failed:\n```\n{traceback.format_exc()}```")
            print(md[-1], flush=True)
        save()

    if not skip_labs:
        try:
            md.extend(_traffic(torch))
        except Exception:  # noqa: BLE001
            md.append(f"\ntraffic table failed:\n```\n{traceback.format_exc()}```")
            print(md[-1], flush=True)
    if latencies:
        md.append("\n## Grading latency\n")
        md.append(f"Wall time of each grading above (sandboxed={sandbox}): runner start, "
                  "known-answer kernel, every check, the timed shapes, result. "
                  f"p50 {statistics.median(latencies):.1f} s, min {min(latencies):.1f} s, "
                  f"max {max(latencies):.1f} s over {len(latencies)} gradings.\n")
        print(md[-1], flush=True)
    save()
    if out:
        print(f"wrote {out}")
    return 0


def _exercise_tables(torch, exercise, repeats, gpu_index, sandbox, md, latencies) -> int:
    """One exercise: reference gradings, the shapes table, repeatability."""
    baseline_path = exercise.folder / "baseline.py"
    baseline = _load(baseline_path) if baseline_path.exists() else None
    runs = []
    for _ in range(repeats):
        result, wall = _grade_reference(exercise, gpu_index, sandbox)
        latencies.append(wall)
        print(f"{exercise.name}: reference graded {result.verdict.value} "
              f"score {result.score:g}/{result.max_score:g} in {wall:.1f} s", flush=True)
        if result.verdict.value != "passed" or not result.performance:
            print(f"  {result.message[:2000]}", flush=True)
            break
        runs.append({s["label"]: s for s in result.performance["shapes"]})
    repeats = 1
    md.append(f"\n## {exercise.name}: graded shapes\n")
    md.append("| shape | copy GB/s | torch GB/s | torch | reference GB/s | reference | "
              "spread | best public peer (FACTS.md) |")
    md.append("|---|---|---|---|---|---|---|---|")
    for shape in exercise.performance.shapes:
        base = time_in_process(torch, getattr(baseline, shape.fn), shape) if baseline else None
        ref = runs[0].get(shape.label) if runs else None
        peer = PUBLIC_PEERS.get((exercise.name, shape.label))
        copy_gbs = ref["copy_gbs"] if ref else base["copy_gbs"] if base else 0.0
        row = f"| {shape.label} | {copy_gbs:.0f} | "
        row += (f"{base['gbs']:.0f} | {_pct(base['fraction'])} | " if base else "— | — | ")
        row += (f"{ref['gbs']:.0f} | **{_pct(ref['fraction'])}** | {_pct(ref['spread'])} | "
                if ref else "— | — | — | ")
        row += f"{_pct(peer[0])} ({peer[1]}) |" if peer else "— |"
        md.append(row)
        print(row, flush=True)
    if len(runs) > 1:
        md.append(f"\nRepeatability: the reference graded {len(runs)} times on one GPU.\n")
        md.append("| shape | fractions | range (points) |")
        md.append("|---|---|---|")
        for label in runs[0]:
            fr = [r[label]["fraction"] * 100 for r in runs if label in r]
            md.append(f"| {label} | {', '.join(f'{f:.1f}' for f in fr)} | "
                      f"{max(fr) - min(fr):.1f} |")
            print(md[-1], flush=True)
    return repeats


def _traffic(torch) -> list[str]:
    from graders.bench import labs

    shape = PerfShape("f", (InputRecipe("x", "uniform", 4096, 4096, "float32"),), ("@x",), {},
                      "4096×4096 float32")
    md = ["\n## The module's traffic table, measured (4096×4096 float32)\n",
          "Time ratios are against the naive kernel (first block) and the fused kernel "
          "(second); the module predicts them from bytes moved.\n",
          "| kernel | traversals | predicted ratio | ms | measured ratio |", "|---|---|---|---|---|"]
    base = None
    for name, fn, trav in labs.TRAFFIC:
        ms = time_in_process(torch, fn, shape)["ms"]
        base = base or (ms, trav)
        md.append(f"| {name} | {trav} | {trav / base[1]:.2f}× | {ms:.4f} | {ms / base[0]:.2f}× |")
        print(md[-1], flush=True)
    mask = torch.triu(torch.full((4096, 4096), float("-inf"), device="cuda"), diagonal=1)
    fused_ms = None
    rows = []
    for name, fn, trav in labs.FUSION:
        ms = time_in_process(torch, lambda x, fn=fn: fn(x, mask), shape)["ms"]
        rows.append((name, trav, ms))
    fused_ms, fused_trav = rows[1][2], rows[1][1]
    for name, trav, ms in rows:
        md.append(f"| {name} | {trav} | {trav / fused_trav:.2f}× | {ms:.4f} | "
                  f"{ms / fused_ms:.2f}× |")
        print(md[-1], flush=True)
    return md
