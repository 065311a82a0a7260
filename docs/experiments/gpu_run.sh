#!/usr/bin/env bash
# The H200 runs behind issue 11's figures (docs/benchmarks.md, docs/verification.md).
# Usage on the device machine, from the repo root: bash docs/experiments/gpu_run.sh PART
# SWEEP_ONLY=a,b limits the sweep to shapes containing a or b (no spaces).
# PART (one or more): latency | calibrate | tests | load | workers (2 GPUs: issue 13) | selftest | corpus, autotune (issue 23) | sweep | repeat | bench | benchall (issue 16). Results go to $OUT (or ./gpu-out).
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# bubblewrap (and redis-server, for workers) from Debian 12's .deb files, carried in .debs/
# (the GPU image has neither)
if ! command -v bwrap >/dev/null && ls .debs/*.deb >/dev/null 2>&1; then
  for f in .debs/*.deb; do dpkg -x "$f" /tmp/bw; done
  export PATH=/tmp/bw/usr/bin:$PATH
  export LD_LIBRARY_PATH=/tmp/bw/lib/x86_64-linux-gnu:/tmp/bw/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
# the server's packages for the load benchmark, carried as wheels in .whl/
if ls .whl/*.whl >/dev/null 2>&1 && [ ! -d /tmp/site ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
fi
[ -d /tmp/site ] && export PYTHONPATH=/tmp/site
# the H200 host has no delegated cgroup: there each runner runs as a job uid of its own
# (graders/isolation/jobuids.py), which must pass through the folders above the repository and the
# Python environment (o+x), as a deployment installs them (docs/deploy.md)
for path in "$PWD" "$(python3 -c 'import sys; print(sys.base_prefix)')" \
            "$(readlink -f "$(command -v python3)")" /tmp/site /tmp/bw; do
  d=$path; while [ "$d" != / ] && [ -n "$d" ]; do
    [ -d "$d" ] && chmod o+x "$d"; d=$(dirname "$d"); done
done
chmod -R o+rX . /tmp/site /tmp/bw 2>/dev/null
echo "job uids needed here (no job cgroup): $(python3 -c 'from graders.isolation.cgroups import cgroups_usable; print(not cgroups_usable())')"
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
python3 -c "import torch, triton, numpy; print('torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__)"
for part in "$@"; do case "$part" in
  latency)
    timeout ${LATENCY_TIMEOUT:-420} python3 docs/experiments/worker_latency.py --device cuda --repeat 12 --extra \
      --out "$OUT/latency.json" 2>&1 | tee "$OUT/latency.log" ;;
  calibrate)
    timeout 280 python3 docs/experiments/block_limit.py --timeout 60 --out "$OUT/block_limit.md" \
      2>&1 | tee "$OUT/block_limit.log" ;;
  tests)
    timeout ${TESTS_TIMEOUT:-580} python3 -m pytest -q -m gpu -s -p no:cacheprovider tests/test_process_cap.py tests/test_gpu.py \
      ${TESTS_K:+-k "$TESTS_K"} 2>&1 | tee -a "$OUT/test_gpu.log" ;;
  load)
    timeout ${LOAD_TIMEOUT:-580} python3 -m graders bench --load --device cuda --out "$OUT/load.md" 2>&1 | tee "$OUT/load.log" ;;
  workers)
    timeout ${WORKERS_TIMEOUT:-580} python3 docs/experiments/workers_bench.py --device cuda --database sqlite \
      --batch ${WORKERS_BATCH:-24} --settle 40 --logs "$OUT" 2>&1 | tee "$OUT/workers.log" ;;
  selftest)
    timeout ${SELFTEST_TIMEOUT:-200} python3 -m graders selftest --device cuda --jobs ${SELFTEST_JOBS:-8} 2>&1 | tee "$OUT/selftest.log" ;;
  autotune)  # issue 23: where an autotuned one-block-per-row kernel's grading goes
    timeout ${AUTOTUNE_TIMEOUT:-200} python3 docs/experiments/autotune_cost.py 2>&1 | tee "$OUT/autotune_cost.log"
    timeout 150 python3 -m graders grade safe_softmax reference_solutions/safe_softmax/from_scratch/autotuned_warps.py \
      --device cuda --json > "$OUT/autotuned.json" 2>&1
    python3 -c "import json; r = json.load(open('$OUT/autotuned.json')); print(r['verdict'], r['duration_s'], json.dumps(r['phases']))" ;;
  corpus)  # issue 23: designs students copy, graded one at a time as a submission is (timed)
    for f in ${CORPUS:-reference_solutions/*/from_scratch/*.py}; do
      ex=$(echo "$f" | cut -d/ -f2)
      timeout ${CORPUS_TIMEOUT:-150} python3 -m graders grade "$ex" "$f" --device cuda --json > "$OUT/one.json" 2>/dev/null
      python3 - "$f" "$OUT/one.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[2]))
except ValueError:
    print(f"{sys.argv[1]:<62} no result"); sys.exit()
failed = [c["name"] for c in r["checks"] if not c["passed"]]
print(f"{sys.argv[1]:<62} {r['verdict']:<13} {r['score']:>7}/{r['max_score']:<4} "
      f"{r['duration_s']:5.1f} s  failed {failed}  {r['message'][:90]!r}")
PY
    done 2>&1 | tee "$OUT/corpus.log" ;;
  bench)
    timeout ${BENCH_TIMEOUT:-500} python3 -m graders bench --exercise ${BENCH_EXERCISE:-safe_softmax} \
      --repeat ${BENCH_REPEAT:-5} --no-labs ${BENCH_FLAGS:-} --out "$OUT/bench.md" 2>&1 | tee "$OUT/bench.log" ;;
  benchall)  # every exercise, the traffic table and the repeats, into a copy of docs/benchmarks.md
    cp docs/benchmarks.md "$OUT/benchmarks.md"
    timeout ${BENCH_TIMEOUT:-500} python3 -m graders bench --repeat ${BENCH_REPEAT:-5} ${BENCH_FLAGS:-} \
      --out "$OUT/benchmarks.md" 2>&1 | tee "$OUT/benchall.log" ;;
  repeat)  # is the spread between gradings in the kernel or in the copy? (issue 16)
    timeout ${REPEAT_TIMEOUT:-300} python3 docs/experiments/repeatability.py \
      --processes ${REPEAT_PROCESSES:-8} 2>&1 | tee "$OUT/repeat.log" ;;
  sweep)
    timeout ${SWEEP_TIMEOUT:-300} python3 docs/experiments/ceiling_sweep.py --budget-s ${SWEEP_BUDGET:-150} \
      $(for o in ${SWEEP_ONLY//,/ }; do printf -- "--only %s " "$o"; done) --out "$OUT/sweep.log" 2>&1 | tail -5 ;;
esac; done
