"""What every platform bundle holds: the engine, one exercise, and the pinned CPU toolchain.

Only ``graders/`` (no caches, no bench: its lab kernels are for GPUs) and the one exercise's
folder go in. Never ``server/``, never another exercise, never ``reference_solutions/``:
the bundle is handed to course staff and unpacked where students' code runs.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from ..registry import REPO_ROOT, get_exercise

# where the platforms' images keep the toolchain: outside /root and /autograder, readable by
# the job uid that runs a submission when bubblewrap cannot (docs/deploy.md)
VENV = "/opt/softmax-autograder/venv"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# the CPU interpreter's toolchain, pinned as requirements.txt (the set CI tests) pins it;
# NVRTC lets a HIP file be compiled (verdict `compiled`) without a GPU
TOOLCHAIN = ("torch", "triton", "numpy", "nvidia-cuda-nvrtc-cu12", "cuda-bindings")
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "bench")


def pins(requirements: Path = REPO_ROOT / "requirements.txt") -> dict[str, str]:
    """{package: exact version} for the toolchain, from requirements.txt."""
    found = {}
    for line in requirements.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;#]+)", line.strip())
        if m and m.group(1).lower() in TOOLCHAIN:
            found[m.group(1).lower()] = m.group(2)
    missing = [name for name in TOOLCHAIN if name not in found]
    if missing:
        raise ValueError(f"requirements.txt pins no version of {', '.join(missing)}")
    return found


def install_script() -> str:
    """Bash that installs bubblewrap and the pinned toolchain on Debian or Ubuntu, as root."""
    v = pins()
    rest = " ".join(f"{name}=={v[name]}" for name in TOOLCHAIN if name != "torch")
    return f"""\
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update
# bubblewrap: the sandbox, used where the container allows user namespaces
apt-get install -y --no-install-recommends bubblewrap python3 python3-venv ca-certificates
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {{
  echo "the graders need Python 3.11 or newer: choose an Ubuntu 24.04 (or Debian 12) base image" >&2
  exit 1; }}
python3 -m venv {VENV}
{VENV}/bin/pip install --no-cache-dir --upgrade pip
# torch's CPU build from its own index: the default one pulls a CUDA build of several GB
{VENV}/bin/pip install --no-cache-dir --index-url {TORCH_CPU_INDEX} torch=={v['torch']}
# triton {v['triton']}'s CPU interpreter breaks with numpy >= 2.3
{VENV}/bin/pip install --no-cache-dir {rest}
# the job uid that runs a submission where bubblewrap cannot must read these
chmod -R o+rX /opt/softmax-autograder
TRITON_INTERPRET=1 {VENV}/bin/python -c "import numpy, torch, triton; print('toolchain:', torch.__version__, triton.__version__, numpy.__version__)"
"""


def copy_grader(exercise: str, dest: Path) -> None:
    """The engine and one exercise under ``dest`` (as graders/ and exercises/<name>/)."""
    spec = get_exercise(exercise)
    shutil.copytree(REPO_ROOT / "graders", dest / "graders", ignore=_SKIP)
    shutil.copytree(spec.folder, dest / "exercises" / spec.name, ignore=_SKIP)
