#!/usr/bin/env bash
# Issue 43 on the H200: one GPU's slots, each job's GPU memory cap, where a grading's time
# goes. Usage on the device, from the repo root: bash docs/experiments/issue43_gpu.sh PART...
# PART: captests | gputests | latency | lanes (lanes_cost.py: wall and CPU-s per grading by lanes) |
#       cpu (cpu_breakdown.py: a grading's CPU-s by runners made, runners' work, the checker) |
#       runnerstart (runner_start.py: one runner's CPU-s by step) |
#       profile | loadN (N slots sharing the GPU, 2 copies of the mix; with
#       GRADERS_TIMING_PROBE=1, timing_probe.py reads where each timing's time went; with
#       HOST_CPU=1, host_cpu.py counts the host's CPU-seconds by kind) |
#       b2bN (12 references back to back through the real server, N slots) | baseb2bN (the
#       same on .old/base.tar.gz, another commit's tree, on this machine) | verdicts |
#       newselftest, then oldselftest (verdicts in two: this tree's selftest first) |
#       disturbers (timing_disturbers.py: a timed copy and softmax beside each thing a busy
#       host does to the GPU and its driver) | autogroup (autogroup_share.py: whether a nice
#       orders processes that are sessions of their own, as runners and slots are)
# (the selftest of the tree before issue 43, carried as .old/old.tar.gz, against this one).
# Results go to $OUT.
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
source docs/experiments/gpu_run.sh >/dev/null 2>&1
set +e
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
nproc
# whether this grader may raise a runner's priority (CAP_SYS_NICE, bit 23): without it the
# pools make their runners at nice 10, not 19 (graders/isolation/launch.py ahead_nice);
# GRADERS_AHEAD_NICE=10 on a load part measures the old way on the same machine
python3 -c "from graders.isolation.launch import ahead_nice, can_raise_priority; print('CAP_SYS_NICE', can_raise_priority(), 'runners made ahead at nice', ahead_nice())"
# the host beside a load part, once a second: memory left, major page faults and pages the
# kernel reclaimed (a host short of memory slows every process's Python in bursts), load
host_watch() {
  while sleep 1; do
    echo "$(date +%s) $(awk '/^MemAvailable/ {print $2}' /proc/meminfo) \
$(awk '/^pgmajfault / {f=$2} /^pgscan_kswapd / {k=$2} /^pgscan_direct / {d=$2} END {print f, k, d}' /proc/vmstat) \
$(cut -d' ' -f1 /proc/loadavg) $(pgrep -c -f graders.runner)"
  done
}
host_summary() {  # columns: time, MemAvailable kB, majfault, kswapd scans, direct scans, load, runners
  awk 'NR==1 {f0=$3; k0=$4; d0=$5; m=$2} {if ($2<m) m=$2; if ($6>l) l=$6; if ($7>r) r=$7; f=$3; k=$4; d=$5}
       END {printf "host: MemAvailable min %.1f GiB, major faults %d, pages scanned by kswapd %d and direct %d, load max %s, runner processes max %d\n", m/1048576, f-f0, k-k0, d-d0, l, r}' "$1"
}
strip() { sed -E 's/ +\[[0-9.]+ s\]$//; s/ in [0-9]+ s$//' "$1" | grep -E '^(ok|WRONG) |as expected'; }
for part in "$@"; do
  t0=$(date +%s)
  case "$part" in
    captests)
      timeout ${CAP_TIMEOUT:-120} python3 -m pytest -q -m gpu -p no:cacheprovider \
        tests/test_gpu_memory_cap.py ${CAP_MORE:-} 2>&1 | tail -15 | tee "$OUT/captests.log" ;;
    gputests)  # the GPU tests but the whole selftest (the verdicts part runs that, twice)
      timeout ${GPUTESTS_TIMEOUT:-240} python3 -m pytest -q -m gpu -p no:cacheprovider \
        tests/test_gpu.py tests/test_gpu_memory_cap.py -k "not selftest_on_cuda" > "$OUT/gputests.log" 2>&1
      tail -15 "$OUT/gputests.log"; grep -E "^(E |FAILED)" "$OUT/gputests.log" | head -30 ;;
    latency)
      timeout ${LATENCY_TIMEOUT:-150} python3 docs/experiments/worker_latency.py --device cuda \
        --repeat 12 --out "$OUT/latency.json" 2>&1 | tail -30 | tee "$OUT/latency.log" ;;
    lanes)
      timeout ${LANES_TIMEOUT:-420} python3 docs/experiments/lanes_cost.py --lanes ${LANES:-1 2 4 8} \
        --repeat ${LANES_REPEAT:-6} --out "$OUT/lanes.json" 2>&1 | grep -v " INFO " | tee "$OUT/lanes.log" | tail -40 ;;
    cpu)  # cpu_breakdown.py: a grading's CPU-seconds by who spent them (runners made, their work, the checker)
      timeout ${CPU_TIMEOUT:-300} python3 docs/experiments/cpu_breakdown.py --lanes ${LANES:-2 4} \
        --repeat ${LANES_REPEAT:-6} --out "$OUT/cpu.json" --sample-worker "$OUT/worker_cpu.json" 2>&1 \
        | grep -v " INFO " | tee "$OUT/cpu.log" | tail -20
      python3 docs/experiments/cpu_sampler.py --summary "$OUT"/worker_cpu.lanes*.json > "$OUT/worker_cpu.txt" 2>&1
      head -50 "$OUT/worker_cpu.txt" ;;
    profile)  # one grading of each reference on one lane, its runner profiled
      for ex in safe_softmax masked_softmax online_softmax; do
        GRADERS_RUNNER_PROFILE=1 timeout 120 python3 -m graders grade $ex \
          reference_solutions/$ex/solution.py --device cuda --lanes 1 --json > "$OUT/profile_$ex.json" 2>/dev/null
        python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['verdict'], r['duration_s']); print(r['output'][:9000])" \
          "$OUT/profile_$ex.json" > "$OUT/profile_$ex.txt" 2>&1; head -3 "$OUT/profile_$ex.txt"
      done
      python3 docs/experiments/timing_probe.py "$OUT"/profile_*.json | tee "$OUT/profile_probe.txt" ;;
    load*)
      n=${part#load}
      host_watch > "$OUT/host_load$n.log" & watcher=$!
      # CPU_SAMPLE=1: every Python process of the bench samples its CPU by stack (cpu_sampler.py)
      sampling=(); [ -n "${CPU_SAMPLE:-}" ] && mkdir -p "$OUT/cpu$n" && sampling=(env
        GRADERS_CPU_SAMPLE="$(realpath -m "$OUT")/cpu$n/p" PYTHONPATH="$PWD/docs/experiments/sampling:${PYTHONPATH:-}")
      # HOST_CPU=1: the host's CPU-seconds by kind over the burst (host_cpu.py: runners made,
      # their work and compiles, the slots' checkers, the server, the rest)
      hostcpu=(); [ -n "${HOST_CPU:-}" ] && hostcpu=(python3 docs/experiments/host_cpu.py
        --gradings 48 --from-line " 0/48 done" --out "$OUT/host_cpu$n.json" --)
      timeout ${LOAD_TIMEOUT:-200} "${hostcpu[@]}" "${sampling[@]}" python3 -m graders bench --load --device cuda --rounds 2 \
        --slots-per-gpu "$n" --out "$OUT/load$n.md" --results "$OUT/load$n.json" > "$OUT/load$n.log" 2>&1
      rc=$?; kill $watcher
      grep -h "host CPU-seconds by kind" "$OUT/load$n.log"
      [ -n "${CPU_SAMPLE:-}" ] && python3 docs/experiments/cpu_sampler.py --summary "$OUT/cpu$n"/p.*.json \
        > "$OUT/cpu${n}_summary.txt" 2>&1 && head -60 "$OUT/cpu${n}_summary.txt"; echo "load $n slots: rc $rc"; host_summary "$OUT/host_load$n.log"; grep -E "an hour|p50|spread|passing|hostile|mutant" "$OUT/load$n.log" | head -30
      [ -f "$OUT/load$n.json" ] && python3 docs/experiments/timing_probe.py "$OUT/load$n.json" | tee "$OUT/load${n}_probe.txt" ;;
    runnerstart)  # runner_start.py: one runner's CPU-seconds by step (imports, warm, known answer)
      timeout ${START_TIMEOUT:-120} python3 docs/experiments/runner_start.py --device cuda --repeat 4 2>&1 \
        | grep -v " INFO " | tee "$OUT/runner_start.txt" ;;
    autogroup)
      timeout 120 python3 docs/experiments/autogroup_share.py --seconds 3 2>&1 | tee "$OUT/autogroup.txt" ;;
    disturbers)
      timeout ${DISTURBERS_TIMEOUT:-200} python3 docs/experiments/timing_disturbers.py \
        --seconds ${DISTURBERS_SECONDS:-8} 2>&1 | tee "$OUT/disturbers.md" ;;
    b2b*)
      n=${part#b2b}
      timeout ${B2B_TIMEOUT:-200} python3 -m graders bench --back-to-back 12 --device cuda \
        --slots-per-gpu "$n" --out "$OUT/b2b$n.md" --results "$OUT/b2b$n.json" > "$OUT/b2b$n.log" 2>&1
      echo "back to back, $n slots: rc $?"; tail -25 "$OUT/b2b$n.log" ;;
    baseb2b*)  # the same bench on the commit before this session's change (.old/base.tar.gz, a
      # git archive), on the same machine: an A/B that no other H200 of the pool can give
      n=${part#baseb2b}; out=$(realpath -m "$OUT")
      mkdir -p /tmp/base && tar xzf .old/base.tar.gz -C /tmp/base && chmod -R o+rX /tmp/base && chmod o+x /tmp/base
      (cd /tmp/base && timeout ${B2B_TIMEOUT:-200} python3 -m graders bench --back-to-back 12 --device cuda \
        --slots-per-gpu "$n" --out "$out/base_b2b$n.md" --results "$out/base_b2b$n.json") \
        > "$OUT/base_b2b$n.log" 2>&1
      echo "back to back on the base tree, $n slots: rc $?"; tail -25 "$OUT/base_b2b$n.log" ;;
    newselftest)  # this tree's GPU selftest alone (verdicts, or oldselftest after it, compares)
      timeout 280 python3 -m graders selftest --device cuda --jobs 8 > "$OUT/selftest_new.log" 2>&1
      echo "new tree: $(tail -1 "$OUT/selftest_new.log")"; grep -E '^WRONG' "$OUT/selftest_new.log" ;;
    verdicts|oldselftest)
      mkdir -p /tmp/old && tar xzf .old/old.tar.gz -C /tmp/old && chmod -R o+rX /tmp/old && chmod o+x /tmp/old
      (cd /tmp/old && timeout 280 python3 -m graders selftest --device cuda --jobs 8) > "$OUT/selftest_old.log" 2>&1
      echo "old tree: $(tail -1 "$OUT/selftest_old.log")"
      if [ "$part" = verdicts ] || [ ! -s "$OUT/selftest_new.log" ]; then
        timeout 280 python3 -m graders selftest --device cuda --jobs 8 > "$OUT/selftest_new.log" 2>&1
      fi
      echo "new tree: $(tail -1 "$OUT/selftest_new.log")"
      if diff <(strip "$OUT/selftest_old.log") <(strip "$OUT/selftest_new.log") > "$OUT/selftest.diff"; then
        echo "every selftest line the same, old and new tree ($(strip "$OUT/selftest_new.log" | grep -c '^ok ') ok lines)"
      else
        echo "selftest lines differ (< old, > new):"; cat "$OUT/selftest.diff"
      fi ;;
  esac
  echo "[$part: $(( $(date +%s) - t0 )) s]"
done
