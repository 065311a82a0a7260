#!/usr/bin/env bash
# Issue 27: the worker run as docker/worker.Dockerfile and compose would run it, on a GPU
# host that cannot run Docker (the H200 device). Each variant starts
# `celery -A graders.service.remote_worker worker` in a mount namespace of its own where:
#   masked  /proc is masked as Docker masks it by default (its MaskedPaths and
#           ReadonlyPaths): what `security_opt: systempaths=unconfined` turns off;
#   nocc    no C compiler is on the machine (gcc, cc, clang hidden): what python:3.12-slim
#           was before the image installed gcc and libc6-dev.
# The worker reports to a real server (DISPATCHER=celery) through a real redis-server with
# a password. Variants that cannot grade must exit 3 without taking work; the last, as the
# image and compose now are, grades the reference solution through Redis.
# Usage (device, repo root): bash docs/experiments/worker_as_image.sh   (results in $OUT)
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
source docs/experiments/gpu_run.sh >/dev/null 2>&1
set +e
W=/tmp/wai; rm -rf $W; mkdir -p $W
REDIS_PASSWORD=wai-redis-password-0123456789
SECRET=wai-task-secret-0123456789abcdef
ADMIN=wai-admin-token-0123456789abcdef
redis-server --port 6391 --requirepass "$REDIS_PASSWORD" --save "" --appendonly no \
  --daemonize yes --logfile $W/redis.log
BROKER="redis://:$REDIS_PASSWORD@127.0.0.1:6391/0"
DATABASE_URL=sqlite:///$W/db.sqlite ADMIN_TOKEN=$ADMIN TASK_SECRET=$SECRET DISPATCHER=celery \
  BROKER_URL=$BROKER GRADER_QUEUE=${DEVICE:-cuda} COURSE_SECRET=wai-course-secret-0123456789 \
  python3 -m server --port 8123 > $W/server.log 2>&1 &
CLIENT="python3 docs/experiments/wai_client.py"  # no curl on the GPU image
$CLIENT health http://127.0.0.1:8123 $ADMIN
$CLIENT submit http://127.0.0.1:8123 $ADMIN

MASKS='for p in /proc/asound /proc/acpi /proc/interrupts /proc/kcore /proc/keys /proc/latency_stats /proc/timer_list /proc/timer_stats /proc/sched_debug /proc/scsi /sys/firmware; do
  [ -e $p ] || continue; if [ -d $p ]; then mount -t tmpfs -o ro tmpfs $p; else mount --bind /dev/null $p; fi; done
for p in /proc/bus /proc/fs /proc/irq /proc/sys /proc/sysrq-trigger; do
  [ -e $p ] && mount --bind $p $p && mount -o remount,bind,ro $p; done'
NOCC='for c in gcc cc clang c89 c99 x86_64-linux-gnu-gcc; do
  for f in $(type -a -P $c 2>/dev/null); do mount --bind /dev/null "$(readlink -f $f)"; done; done'

worker() {  # worker NAME SETUP... : run one variant, print its end
  local name=$1; shift
  local setup="$*"
  echo "=== variant: $name"
  timeout 240 unshare -m --propagation private bash -c "$setup
    echo \"C compiler: \$(python3 -c 'import shutil; print(shutil.which(\"gcc\") or shutil.which(\"clang\") or \"none\")')\"
    echo \"masked: \$(grep -c ' /proc/' /proc/self/mounts) mounts under /proc\"
    unset CC
    exec env -u DATABASE_URL -u ADMIN_TOKEN BROKER_URL='$BROKER' SERVER_URL=http://127.0.0.1:8123 \
      TASK_SECRET=$SECRET GRADER_DEVICE=${DEVICE:-cuda} GRADER_GPU_INDEX=0 WORKER_NAME=$name \
      WORKER_HEARTBEAT_FILE=$W/$name.alive GRADERS_JOB_UID_BASE=63000 \
      python3 -m celery -A graders.service.remote_worker worker --pool solo -Q ${DEVICE:-cuda} -n $name@%h \
      --without-gossip --without-mingle -l INFO" > $W/$name.log 2>&1 &
  echo $! > $W/$name.pid
}

started() {  # wait for a variant to exit (rc) or to be ready; print what it said
  local name=$1 pid; pid=$(cat $W/$name.pid)
  for i in $(seq 200); do
    if ! kill -0 $pid 2>/dev/null; then wait $pid; echo "$name exited rc=$?"; break; fi
    [ -e $W/$name.alive ] && { echo "$name ready (its heartbeat file beats) after ${i}s"; break; }
    sleep 1
  done
  grep -E "C compiler|masked|out of service|ready|Failed to find|Can't mount|problem|CRITICAL" $W/$name.log | cut -c1-400 | head -12
}

for v in "masked+nocc:$MASKS
$NOCC" "nocc:$NOCC" "masked:$MASKS"; do
  name=${v%%:*}; setup=${v#*:}
  worker "${name//+/-}" "$setup"; started "${name//+/-}"
  $CLIENT status http://127.0.0.1:8123 $ADMIN
  kill $(cat $W/${name//+/-}.pid) 2>/dev/null; sleep 2  # one that could start (on a CPU) goes
done

echo "=== variant: as-image (compiler present, systempaths=unconfined: no masks)"
worker as-image true; started as-image
$CLIENT wait http://127.0.0.1:8123 $ADMIN
WORKER_HEARTBEAT_FILE=$W/as-image.alive python3 -m graders.service.worker_alive && echo "healthcheck (heartbeat file): ok" || echo "healthcheck failed"
grep -E "grading|stored|submission=" $W/as-image.log | cut -c1-300 | tail -5
pkill -f "graders.service.remote_worker" ; pkill -f "python3 -m server"; redis-cli -p 6391 -a "$REDIS_PASSWORD" shutdown 2>/dev/null
cp $W/*.log "$OUT/" 2>/dev/null
