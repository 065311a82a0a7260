#!/usr/bin/env bash
# Issue 44 on the H200: the two stretch exercises' selftest, their references' speed against
# copy, and the read-everything design beside them. Run from the repo root; results in $OUT.
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
source docs/experiments/gpu_run.sh >/dev/null 2>&1
set +e
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
timeout 200 python3 -m graders selftest --device cuda --jobs 8 --exercise causal_block_skip \
  --exercise log_softmax_xent > "$OUT/selftest44.log" 2>&1
grep -vE "^ok " "$OUT/selftest44.log" | tail -5
for ex in log_softmax_xent causal_block_skip; do
  timeout 150 python3 -m graders bench --exercise $ex --no-labs --repeat 1 --out "$OUT/bench_$ex.md" \
    > "$OUT/bench_$ex.log" 2>&1
  echo "bench $ex: rc $?"; cat "$OUT/bench_$ex.md"
done
timeout 120 python3 -m graders grade causal_block_skip --device cuda \
  reference_solutions/causal_block_skip/from_scratch/reads_whole_row.py > "$OUT/reads_whole_row.txt" 2>&1
grep -iE "passed|failed|score|of copy|%" "$OUT/reads_whole_row.txt" | head -12
