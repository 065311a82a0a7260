#!/usr/bin/env bash
# Issue 28 on the H200: the regrouped graders give the same selftest verdicts as the tree
# before the regrouping, on the same GPU in the same call. The old tree travels as
# .old/old.tar.gz (git archive 7ec63f5, carried); results go to $OUT.
# Usage on the device, from the repo root: bash docs/experiments/layout_gpu.sh
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
source docs/experiments/gpu_run.sh >/dev/null 2>&1
set +e
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
mkdir -p /tmp/old && tar xzf .old/old.tar.gz -C /tmp/old && chmod -R o+rX /tmp/old && chmod o+x /tmp/old
strip() { sed -E 's/ +\[[0-9.]+ s\]$//; s/ in [0-9]+ s$//' "$1" | grep -E '^(ok|WRONG) |as expected'; }
(cd /tmp/old && timeout 280 python3 -m graders selftest --device cuda --jobs 8) > "$OUT/selftest_old.log" 2>&1
echo "old tree: $(tail -1 "$OUT/selftest_old.log")"
timeout 280 python3 -m graders selftest --device cuda --jobs 8 > "$OUT/selftest_new.log" 2>&1
echo "new tree: $(tail -1 "$OUT/selftest_new.log")"
if diff <(strip "$OUT/selftest_old.log") <(strip "$OUT/selftest_new.log") > "$OUT/selftest.diff"; then
  echo "every selftest line the same, old and new tree ($(strip "$OUT/selftest_new.log" | grep -c '^ok ') ok lines)"
else
  echo "selftest lines differ:"; cat "$OUT/selftest.diff"
fi
