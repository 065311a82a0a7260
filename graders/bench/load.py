"""``python -m graders bench --load``: a realistic mix through the real server, one GPU.

The server is started as a subprocess (``python -m server``) on a fresh SQLite database,
with one grading slot (or, ``--slots-per-gpu N``, N slots sharing one GPU) and limits
raised so that nothing is refused. One student per
submission is added through the roster API, the whole mix (``mix/manifest.toml``) is
submitted at once, and the submissions are polled until each is graded (or ``error``).
Nothing of the server is imported here: it is driven over HTTP with urllib, as a
client would, so the figures include the queue, the grader's process start and the
database.

Per submission: latency = finished_at - started_at (the slot's claim to the stored
result) and wait = started_at - created_at (time in the queue). Per class: p50, p95
and max latency, and the verdicts seen. Throughput = gradings / (last finished_at -
first started_at), an hour. The target (issue 43: "≥ 2,000 gradings an hour on one H200,
no non-hostile grading over 10 s") is checked and said. Timing spread: how much the
measured speed of one passing file varies between its gradings (``--rounds 2`` or more),
to compare sharing the GPU with not sharing it.

The parts, each a module of its own: ``load_mix`` (the manifest's entries and the choice
sent), ``load_client`` (one JSON request over HTTP), ``load_harness`` (the server's
lifecycle and the burst through it), ``load_record`` (one submission as the API reports
it), ``load_stats`` (percentiles and rates) and ``load_report`` (the markdown section).
This module runs them in order, and is where the CLI, the tests and docs/experiments
import the bench's names from.
"""

from __future__ import annotations

import json

import sys
import tempfile
from pathlib import Path

from graders.bench.load_client import ServerError, http_json
from graders.bench.load_harness import (Server, fetch_results, load_bench_device, submit_all,
                                        wait_for_all)
from graders.bench.load_mix import CLASSES, MixEntry, load_mix, select_mix, source_for
from graders.bench.load_record import Record
from graders.bench.load_report import SECTION, render_section, write_section
from graders.bench.load_stats import (PHASES, busy_per_hour, class_rows, percentile,
                                      phase_rows, throughput_per_hour, timing_spread)

__all__ = ["CLASSES", "PHASES", "SECTION", "MixEntry", "Record", "ServerError", "busy_per_hour",
           "class_rows", "http_json", "load_mix", "percentile", "phase_rows", "render_section",
           "run_load_bench", "select_mix", "source_for", "throughput_per_hour",
           "timing_spread", "write_section"]


def run_load_bench(out: Path | None, device: str = "auto", port: int = 0, rounds: int = 1,
                   only_classes=None, *, mix: list[MixEntry] | None = None,
                   time_cap_s: float | None = None, poll_s: float = 1.0,
                   slots_per_gpu: int = 1, results: Path | None = None) -> int:
    """Grade the mix through the server's queue on one GPU's slots (or one CPU slot);
    print (and with `out`, record) p50/p95 per class and gradings per hour. 0 when every
    submission was graded, 1 when some were not (the time cap), 2 when the server could
    not be run.

    `mix` replaces the manifest (tests); `rounds` sends that many copies in one burst;
    `slots_per_gpu` is the server's SLOTS_PER_GPU (on the CPU it changes nothing);
    `results`: a JSON file for each grading's record and result (phases, timelines)."""
    entries = mix if mix is not None else load_mix()
    kind = load_bench_device(device)
    slots_per_gpu = max(1, slots_per_gpu) if kind == "cuda" else 1  # the CPU has one slot
    chosen = select_mix(entries, kind, only_classes)
    skipped = [e for e in entries if e not in chosen]
    chosen = chosen * max(1, rounds)
    if not chosen:
        print("load bench: nothing to send", file=sys.stderr)
        return 2
    if skipped:
        print(f"load bench: leaving out {len(skipped)} entries "
              f"({', '.join(sorted({e.klass for e in skipped}))})", flush=True)
    # generous: the hostile ones may each run to the 300 s limit, and a CPU grading ~40 s
    time_cap_s = time_cap_s or 600 + 330 * len(chosen)

    with tempfile.TemporaryDirectory(prefix="load-bench-") as tmp:
        server = Server(device, port, Path(tmp), slots_per_gpu=slots_per_gpu)
        try:
            with server:
                print(f"load bench: server on {server.base}, GRADER_DEVICE={device}, "
                      f"SLOTS_PER_GPU={slots_per_gpu}, {len(chosen)} submissions", flush=True)
                records = submit_all(server, chosen)
                finished = wait_for_all(server, records, time_cap_s, poll_s)
                fetch_results(server, records)
        except (ServerError, OSError) as exc:
            print(f"load bench: {exc}\n--- server log ---\n{server.log_tail()}",
                  file=sys.stderr)
            return 2

    section = render_section(records, device, rounds, skipped,
                             mix_name="a mix given by the caller" if mix is not None else
                             "the mix of `graders/bench/mix/manifest.toml`",
                             slots_per_gpu=slots_per_gpu)
    print(section, flush=True)
    if results:
        results.write_text(json.dumps([r.to_json() for r in records], indent=1))
        print(f"wrote each grading's result to {results}")
    if out:
        write_section(out, section)
        print(f"wrote the section to {out}")
    return 0 if finished else 1
