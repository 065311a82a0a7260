"""Where a timing's time goes, from the gradings a bench kept (issue 43).

Reads the load bench's ``--results`` JSON (or one ``graders grade --json`` result) of a run
with ``GRADERS_TIMING_PROBE=1`` (or ``GRADERS_RUNNER_PROFILE=1``): the runner printed one
``timing probe`` line per timed shape (graders/runner/timing.py ``_Probe``). Prints, per
shape, the median over the gradings of each part's host seconds and GPU milliseconds (and
the runner thread's CPU-seconds, context switches and allocator trips where printed), then
the medians of the timing phases (wait for the GPU alone, the GPU alone, the rows judged).

    python3 docs/experiments/timing_probe.py gpu-out/load6.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict

LINE = re.compile(r"timing probe (\S+) (\S+ \S+): (\d+) reps in ([\d.]+) s, (\d+) late; "
                  r"host s (.*?); GPU ms (.*?)(?:; counts (.*))?$", re.M)


def parts(text: str) -> dict[str, float]:
    out = {}
    for item in text.split(", "):
        name, _, value = item.rpartition(" ")
        out[name] = float(value)
    return out


def results(data) -> list[dict]:
    if isinstance(data, dict):
        return [data]
    return [r["result"] for r in data if r.get("result")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    shapes: dict[str, list[dict]] = defaultdict(list)
    phases: dict[str, list[float]] = defaultdict(list)
    for name in args.files:
        with open(name) as f:
            for result in results(json.load(f)):
                for m in LINE.finditer(result.get("output") or ""):
                    fn, shape, reps, wall, late, host, gpu, counts = m.groups()
                    shapes[f"{fn} {shape}"].append({"reps": int(reps), "wall": float(wall),
                                                     "late": int(late),
                                                     **{f"host {k}": v for k, v in parts(host).items()},
                                                     **{f"gpu {k}": v for k, v in parts(gpu).items()},
                                                     **(parts(counts) if counts else {})})
                for key in ("timing_gate_wait_s", "timing_s", "timing_judge_s", "checks_s",
                            "timing_warmup_s", "duration_s"):
                    value = (result.get("phases") or {}).get(key, result.get(key))
                    if isinstance(value, (int, float)) and (key != "duration_s" or
                                                            "timing_s" in (result.get("phases") or {})):
                        phases[key].append(float(value))
    if not shapes:
        print("no timing probe lines (was GRADERS_TIMING_PROBE=1 set, and the output kept?)")
    for shape, rows in sorted(shapes.items()):
        keys = list(dict.fromkeys(k for r in rows for k in r))
        med = {k: statistics.median(r[k] for r in rows if k in r) for k in keys}
        print(f"{shape} (n={len(rows)}): " + ", ".join(
            f"{k} {v:.3g}" for k, v in med.items()))
    for key, values in phases.items():
        values.sort()
        print(f"{key}: n={len(values)} p50 {statistics.median(values):.2f} "
              f"max {values[-1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
