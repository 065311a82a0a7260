#!/usr/bin/env bash
# Makes the git-ignored folders a device call carries for issue43_gpu.sh and gpu_run.sh,
# on this machine, before the call (a lent GPU machine starts bare and reaches nothing):
#   .debs/  Debian 12's bubblewrap and libcap2 (the GPU image has no bwrap; gpu_run.sh unpacks them)
#   .whl/   the server's wheels for the GPU image's Python 3.12 (the load and back-to-back
#           benches start the real server; the image has torch, triton and numpy, not these)
#   .old/   old.tar.gz, the tree at OLD_REV (default: before issue 43's first commit), whose
#           selftest the `verdicts` part compares line by line with this tree's
# Usage, from the repo root: bash docs/experiments/device_carry.sh [OLD_REV]
# Then carry [".debs", ".whl", ".old"] in the device call.
set -euo pipefail
cd "$(dirname "$0")/../.."
old_rev=${1:-032794e^}
mkdir -p .git/info
for folder in .debs/ .whl/ .old/; do
  grep -qxF "$folder" .git/info/exclude 2>/dev/null || echo "$folder" >> .git/info/exclude
done

mkdir -p .debs
(cd .debs && apt-get download bubblewrap libcap2)

# The web tier's install (pyproject.toml's `server` extra, at requirements.txt's pins: a test
# holds the two together) and what it needs, as pip resolves it for the device's Python;
# pip's configured index, as always. Left out: what the benches' server does not start there
# (PostgreSQL's driver: SQLite; Celery and Redis: the local worker; copydetect: no similarity
# report). The base dependency, numpy, is not read: the image has it.
pins=$(mktemp)
python3 - > "$pins" <<'PY'
import tomllib
unused = ("psycopg", "celery", "kombu", "redis", "copydetect")
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["server"]
print("\n".join(pin for pin in extra if not pin.startswith(unused)))
PY
rm -rf .whl && mkdir .whl
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d .whl -r "$pins"
rm -f "$pins"

mkdir -p .old
git archive "$old_rev" | gzip > .old/old.tar.gz
du -sh .debs .whl .old
