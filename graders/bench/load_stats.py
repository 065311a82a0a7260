"""The load bench's arithmetic: percentiles, gradings per hour, the rows per class and the
spread of the timings, from the submissions' records."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from graders.bench.load_mix import CLASSES, HOSTILE
from graders.bench.load_record import Record


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear between the closest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def per_hour(count: int, seconds: float) -> float | None:
    return count / seconds * 3600 if count and seconds > 0 else None


def span_s(records: list[Record]) -> float | None:
    """Seconds from the first claim to the last stored result of the finished ones."""
    done = [r for r in records if r.done and r.started_at]
    if not done:
        return None
    return (max(r.finished_at for r in done) - min(r.started_at for r in done)).total_seconds()


def throughput_per_hour(records: list[Record]) -> float | None:
    """Finished gradings per hour of wall clock, first claim to last stored result."""
    span = span_s(records)
    return None if span is None else per_hour(sum(r.done for r in records), span)


def busy_per_hour(records: list[Record]) -> float | None:
    """Gradings per hour of a slot's own busy time (the sum of their latencies): what
    a slot does for these submissions alone, whatever else was in the queue."""
    latencies = [r.latency_s for r in records if r.done and r.latency_s is not None]
    return per_hour(len(latencies), sum(latencies))


@dataclass
class ClassRow:
    name: str
    n: int
    p50_s: float | None
    p95_s: float | None
    max_s: float | None
    wait_p50_s: float | None
    verdicts: dict[str, int]


def class_row(name: str, records: list[Record]) -> ClassRow:
    latencies = [r.latency_s for r in records if r.latency_s is not None and r.done]
    waits = [r.wait_s for r in records if r.wait_s is not None]
    verdicts: dict[str, int] = {}
    for r in records:
        key = r.verdict if r.done else f"unfinished ({r.status})"
        if r.status == "error":
            key = f"error ({r.verdict})"
        verdicts[key] = verdicts.get(key, 0) + 1
    return ClassRow(name, len(records), percentile(latencies, 50), percentile(latencies, 95),
                    max(latencies) if latencies else None, percentile(waits, 50), verdicts)


def class_rows(records: list[Record]) -> list[ClassRow]:
    """One row per class present (in CLASSES order), then all but hostile, then all."""
    rows = [class_row(k, [r for r in records if r.entry.klass == k])
            for k in CLASSES if any(r.entry.klass == k for r in records)]
    if any(r.entry.klass == HOSTILE for r in records) and len(rows) > 1:
        rows.append(class_row("all but hostile",
                              [r for r in records if r.entry.klass != HOSTILE]))
    rows.append(class_row("all", records))
    return rows


def timing_spread(records: list[Record], figure: str) -> tuple[float, float, int] | None:
    """(median, max, files) of the spread of performance ``figure`` over the passing files
    graded more than once: each file's (max − min) / median of its timed values. None
    when no file was timed twice."""
    values: dict[tuple[str, str], list[float]] = {}
    for r in records:
        value = ((r.result or {}).get("performance") or {}).get(figure)
        if r.entry.klass == "passing" and r.done and isinstance(value, (int, float)):
            values.setdefault((r.entry.label, r.entry.exercise), []).append(float(value))
    spreads = [(max(v) - min(v)) / statistics.median(v) for v in values.values()
               if len(v) > 1 and statistics.median(v) > 0]
    if not spreads:
        return None
    return statistics.median(spreads), max(spreads), len(spreads)


# Where a grading's time went (issue 43): the grader's own phases from its JSON (graders/engine,
# graders/service/slots.py), then what lies around the grader. The timed shapes' compile runs in
# one lane beside the checks, so the rows do not add up to the latency.
PHASES = (
    ("acquire_s", "first runner taken (0: made ahead)"),
    ("load_s", "submission loaded (imported or compiled)"),
    ("checks_s", "checks: compiles and runs, over the lanes"),
    ("timing_warmup_s", "timed shapes compiled (in one lane, beside the checks)"),
    ("timing_gate_wait_s", "wait for the GPU alone"),
    ("timing_s", "timed shapes, the GPU alone"),
    ("close_s", "runners closed before the answer (a worker answers first: absent)"),
    ("duration_s", "the grader in all (its duration_s)"),
    ("health_s", "the slot's health check before the answer (a worker's comes after)"),
    ("around_s", "around the grader: claim, hand-off, result stored"),
    ("latency_s", "claim to stored result (latency)"),
)


@dataclass
class PhaseRow:
    key: str
    label: str
    n: int
    p50_s: float | None
    p95_s: float | None


def phase_seconds(record: Record) -> dict[str, float]:
    """One grading's seconds per phase of PHASES, those it has."""
    result = record.result or {}
    phases = result.get("phases") or {}
    out = {key: float(phases[key]) for key, _ in PHASES
           if isinstance(phases.get(key), (int, float)) and not isinstance(phases[key], bool)}
    if isinstance(result.get("duration_s"), (int, float)):
        out["duration_s"] = float(result["duration_s"])
    if record.latency_s is not None:
        out["latency_s"] = record.latency_s
        if "duration_s" in out:
            out["around_s"] = max(0.0, record.latency_s - out["duration_s"]
                                  - out.get("health_s", 0.0))
    return out


def phase_rows(records: list[Record]) -> list[PhaseRow]:
    """p50 and p95 of each phase over the finished non-hostile gradings that have it."""
    seconds = [phase_seconds(r) for r in records if r.done and r.entry.klass != HOSTILE]
    rows = []
    for key, label in PHASES:
        values = [s[key] for s in seconds if key in s]
        if values:
            rows.append(PhaseRow(key, label, len(values), percentile(values, 50),
                                 percentile(values, 95)))
    return rows
