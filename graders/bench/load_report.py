"""The load bench's markdown: the section that says how the mix was measured, its summary
against the issue's target, and the tables per class and per submission; and its place in
a file of benchmarks, replaced or appended, the rest kept."""

from __future__ import annotations

import datetime
import math
from pathlib import Path

from graders.bench.load_mix import HOSTILE, MixEntry
from graders.bench.load_record import Record
from graders.bench.load_stats import (busy_per_hour, class_rows, phase_rows, span_s,
                                      throughput_per_hour, timing_spread)

SECTION = "## Throughput: the mix through the queue"
# issue 43: one H200 grades a 400-student deadline (three tries each in the last hour is
# 1,200) with room to spare, and no ordinary submission waits long for its answer
TARGET_PER_HOUR = 2000
TARGET_MAX_LATENCY_S = 10.0


def _s(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def versions_in_words(records: list[Record]) -> tuple[str, str]:
    """(device, versions) in words, from the first result that carries them."""
    for r in records:
        result = r.result or {}
        if result.get("versions"):
            versions = ", ".join(f"{k} {v}" for k, v in result["versions"].items() if v)
            grader = result.get("grader_version")
            if grader:
                versions += f", graders {grader}"
            device = result.get("device_name") or (
                "the CPU interpreter" if result.get("device") == "cpu" else result.get("device"))
            return str(device or "unknown device"), versions
    return "unknown device", "versions unknown (no result)"


def target_verdict(records: list[Record], rate: float | None) -> str:
    """Whether the issue's target is met, and if not, why."""
    slow = [r for r in records if r.entry.klass != HOSTILE
            and (not r.done or (r.latency_s or 0) > TARGET_MAX_LATENCY_S)]
    misses = []
    if rate is None or rate < TARGET_PER_HOUR:
        misses.append(f"{_s(rate, 0)} an hour is under {TARGET_PER_HOUR}")
    if slow:
        worst = max(slow, key=lambda r: r.latency_s or math.inf)
        misses.append(f"{len(slow)} non-hostile gradings over {TARGET_MAX_LATENCY_S:g} s or "
                      f"unfinished (slowest {worst.entry.label}, {_s(worst.latency_s)} s)")
    head = (f"Target: ≥ {TARGET_PER_HOUR} gradings an hour, no non-hostile grading over "
            f"{TARGET_MAX_LATENCY_S:g} s: ")
    return head + ("**met**." if not misses else "**missed**: " + "; ".join(misses) + ".")


def spread_line(records: list[Record]) -> str:
    """The timing spread in words: sharing the GPU must not make timings less repeatable."""
    head = ("Timing spread (passing files graded more than once; per file (max − min) / "
            "median of its speed, then the median and max over the files): ")
    parts = []
    for figure, name in (("fraction_of_copy", "fraction of copy"), ("gbs", "GB/s")):
        spread = timing_spread(records, figure)
        if spread is not None:
            median, worst, files = spread
            parts.append(f"{name} median {median:.1%}, max {worst:.1%} ({files} files)")
    return head + ("; ".join(parts) if parts else "— (no passing file was timed twice: "
                                                  "`--rounds 2` or more).")


def section_heading(slots_per_gpu: int) -> str:
    """Sharing on and off keep a section each in one file, to be compared."""
    return SECTION if slots_per_gpu <= 1 else f"{SECTION}, {slots_per_gpu} slots per GPU"


def _slots_words(slots_per_gpu: int) -> str:
    if slots_per_gpu <= 1:
        return "one grading slot (SLOTS_PER_GPU=1)"
    return (f"{slots_per_gpu} grading slots sharing one GPU (SLOTS_PER_GPU={slots_per_gpu}: "
            "their checks side by side, each timing alone)")


def _left_out(skipped: list[MixEntry]) -> str:
    classes = sorted({e.klass for e in skipped})
    why = ("the CPU interpreter would spin on the endless kernel until its 300 s limit"
           if HOSTILE in classes else "not asked for")
    return f"Left out: {len(skipped)} submissions of class {', '.join(classes)} ({why})."


def render_section(records: list[Record], device_arg: str, rounds: int,
                   skipped: list[MixEntry], today: datetime.date | None = None,
                   mix_name: str = "the mix of `graders/bench/mix/manifest.toml`",
                   slots_per_gpu: int = 1) -> str:
    """The markdown section: how it was measured, the summary, per class, per submission."""
    today = today or datetime.date.today()
    device, versions = versions_in_words(records)
    rate = throughput_per_hour(records)
    done = [r for r in records if r.done]
    copies = f", {rounds} copies of it" if rounds > 1 else ""

    md = [section_heading(slots_per_gpu), "",
          f"Measured by `python -m graders bench --load` on {device}, {today.isoformat()}; "
          f"{versions}. The real server (`python -m server`, SQLite, GRADER_DEVICE="
          f"{device_arg}) with {_slots_words(slots_per_gpu)}; one student per "
          "submission; "
          f"{len(records)} submissions, {mix_name}{copies}, sent at once. Latency = the "
          "slot's claim to the stored result (finished_at − started_at); wait = time queued "
          "(started_at − created_at); grader = the grader's own duration_s.", ""]
    own = sorted({r.entry.exercise for r in records if r.params})
    if own:
        md += [f"Each {' and '.join(own)} file was sent with its student's own parameters "
               "written in, as the server derives them and their exercise page shows them "
               "(`[[own_params]]` in the manifest).", ""]
    if skipped:
        md += [_left_out(skipped), ""]
    summary = (f"**{_s(rate, 0)} gradings per hour**: {len(done)} of {len(records)} graded in "
               f"{_s(span_s(records), 0)} s, first claim to last stored result.")
    if any(r.entry.klass == HOSTILE for r in records):
        realistic = [r for r in records if r.entry.klass != HOSTILE]
        summary += (" Without the hostile class, a slot's busy rate (their count over the "
                    f"sum of their latencies) is {_s(busy_per_hour(realistic), 0)} an hour.")
    md += [summary, "", target_verdict(records, rate), "", spread_line(records), ""]

    md += ["| class | n | p50 s | p95 s | max s | p50 wait s | verdicts |",
           "|---|---|---|---|---|---|---|"]
    for row in class_rows(records):
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(row.verdicts.items()))
        md.append(f"| {row.name} | {row.n} | {_s(row.p50_s)} | {_s(row.p95_s)} | "
                  f"{_s(row.max_s)} | {_s(row.wait_p50_s)} | {verdicts} |")

    phases = phase_rows(records)
    if phases:
        md += ["", "Where the time went (the non-hostile gradings; the timed shapes compile in "
               "one lane beside the checks, so the rows do not add up):", "",
               "| phase | n | p50 s | p95 s |", "|---|---|---|---|"]
        md += [f"| {row.label} | {row.n} | {_s(row.p50_s, 2)} | {_s(row.p95_s, 2)} |"
               for row in phases]

    md += ["", "| # | file | exercise | class | verdict | score | latency s | wait s | grader s |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        verdict = r.verdict if r.done else f"unfinished ({r.status})"
        score = "—" if r.score is None else f"{r.score:g}"
        md.append(f"| {r.id} | {r.entry.label} | {r.entry.exercise} | {r.entry.klass} | "
                  f"{verdict} | {score} | "
                  f"{_s(r.latency_s)} | {_s(r.wait_s)} | {_s(r.grader_s)} |")
    return "\n".join(md) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replace the section (by its heading, its first line) in the file, or append it; the
    rest of the file is kept.

    The section runs from its heading to the next level-2 heading or HTML comment line
    (`graders bench` keeps its notes after such a marker). Appended at the end, it sits in
    the part `graders bench --out` keeps, so the two benches do not erase each other."""
    text = path.read_text() if path.exists() else ""
    heading = section.splitlines()[0].rstrip()
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading), None)
    if start is None:
        joiner = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n")
                                                               else "\n\n")
        path.write_text(text + joiner + section)
        return
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("## ") or lines[i].startswith("<!--")), len(lines))
    tail = "".join(lines[end:])
    path.write_text("".join(lines[:start]) + section + ("\n" + tail if tail else ""))
