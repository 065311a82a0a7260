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

# The server's own packages at requirements.txt's pins (one source of versions), and what
# they need, as pip resolves it for the device's Python; pip's configured index, as always.
server_packages="fastapi uvicorn sqlalchemy alembic pydantic-settings python-multipart httpx
  PyLTI1p3 PyJWT jwcrypto cryptography prometheus-client jinja2 markdown-it-py"
pins=$(mktemp)
for name in $server_packages; do
  grep -iE "^${name}(\[[a-z]+\])?==" requirements.txt || { echo "no pin for $name in requirements.txt" >&2; exit 1; }
done > "$pins"
rm -rf .whl && mkdir .whl
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d .whl -r "$pins"
rm -f "$pins"

mkdir -p .old
git archive "$old_rev" | gzip > .old/old.tar.gz
du -sh .debs .whl .old
