"""The human-readable report of a grading run (the CLI without --json)."""

from __future__ import annotations

import time

from graders.engine.results import CheckResult, GradeResult
from graders.shared.vocabulary import Verdict


def render(result: GradeResult) -> str:
    lines = [
        f"{result.exercise} · {result.language} · {result.device_name or result.device}",
        f"verdict: {result.verdict.value}    score: {result.score:g}/{result.max_score:g}    "
        f"({result.duration_s:.1f} s)",
    ]
    if result.params:  # the exercise's per-student values this grading judged against
        lines.append("params: " + ",".join(f"{k}={v}" for k, v in result.params.items()))
    if result.message and result.verdict is not Verdict.FAILED:
        lines.append("")
        lines.append(result.message)
    if result.checks:
        lines.append("")
        width = max(len(c.name) for c in result.checks)
        for c in result.checks:
            mark = "PASS" if c.passed else ("----" if not c.ran else "FAIL")
            lines.append(f"  {mark}  {c.name:<{width}}  {c.points:.4g}/{c.max_points:.4g}")
            if not c.passed and c.ran:
                lines.append(f"        {c.message}")
                if c.dump:
                    lines.extend(dump_table(c.dump))
    lines.extend(_performance(result.performance))
    if result.output:
        lines.append("")
        lines.append("your program printed:")
        lines.extend("  | " + line for line in result.output.rstrip().splitlines()[-20:])
        if result.output_dropped_bytes:
            lines.append(f"  ({result.output_dropped_bytes} more bytes dropped)")
    return "\n".join(lines)


def _performance(perf: dict | None) -> list[str]:
    if not perf:
        return []
    if "skipped" in perf:
        return ["", f"performance: not timed ({perf['skipped']})"]
    lines = ["", f"performance: {perf['points']:g}/{perf['max_points']:g} points, "
                 f"{perf['fraction_of_copy'] * 100:.1f}% of copy (geometric mean)",
             f"  {'shape':<34} {'ms':>8} {'GB/s':>7} {'copy GB/s':>9} {'of copy':>7} {'spread':>6}"]
    for s in perf["shapes"]:
        lines.append(f"  {s['label']:<34} {s['ms']:>8.4f} {s['gbs']:>7.0f} {s['copy_gbs']:>9.0f} "
                     f"{s['fraction'] * 100:>6.1f}% {s['spread'] * 100:>5.1f}%")
    said = [(s["label"], s["diagnosis"]) for s in perf["shapes"] if s.get("diagnosis")]
    if said:
        lines.append("  what the times say (never part of the score):")
        for label, diagnosis in said:
            lines.append(f"    {label}: {diagnosis.get('text') or 'no words for its bytes'}")
            lines += [f"      compiled: {k['text']}" for k in diagnosis.get("kernels", [])]
            lines += [f"      warning: {w}" for w in diagnosis.get("warnings", [])]
    return lines


def dump_table(dump: dict) -> list[str]:
    """A failed check's worst row as a small table (this report, JUnit's failure text, the
    platforms' results.json); none for a dump of values rather than of a row's columns
    (judge.compare_values)."""
    if "columns" not in dump:
        return []
    rows = [("column", dump["columns"])]
    for key in ("input", "expected", "got"):
        if key in dump:
            rows.append((key, dump[key]))

    def cell(v):
        return v if isinstance(v, str) else f"{v:.6g}"

    out = [f"        row {dump['row']} of {'×'.join(map(str, dump['shape']))} {dump['dtype']}:"]
    for name, values in rows:
        out.append(f"        {name:>9} " + " ".join(f"{cell(v):>12}" for v in values))
    return out


def progress_line(check: CheckResult, started: float) -> str:
    """One line as a check finishes (the CLI on a terminal): mark, name, points, and when
    it finished since the grading began (checks run side by side: not its own time)."""
    mark = "PASS" if check.passed else "FAIL"
    return (f"  {mark}  {check.name}  {check.points:.4g}/{check.max_points:.4g}  "
            f"[done at {time.monotonic() - started:.1f} s]")
