"""What every platform bundle holds: the engine, one exercise, and the pinned CPU toolchain.

Only ``graders/`` (no caches, no bench: its lab kernels are for GPUs) and the one exercise's
folder go in. Never ``server/``, never another exercise, never ``reference_solutions/``:
the bundle is handed to course staff and unpacked where students' code runs.
"""

from __future__ import annotations

import re
import secrets
import shutil
from pathlib import Path

from graders.engine.registry import get_exercise
from graders.shared.paths import REPO_ROOT

# where the platforms' images keep the toolchain: outside /root and /autograder, readable by
# the job uid that runs a submission when bubblewrap cannot (docs/deploy.md)
VENV = "/opt/softmax-autograder/venv"
# the CPU interpreter's toolchain, pinned as requirements.txt (the set CI tests) pins it
# (no NVRTC: the platforms take Triton files only, graders/integrations/grading.py)
TOOLCHAIN = ("torch", "triton", "numpy")
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "bench")
SECRET_NAME = "params_secret"  # beside graders/: the key of the students' parameters


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
    """Bash that installs bubblewrap and the pinned toolchain on Debian or Ubuntu, as root.

    The graders need Python 3.11+. Gradescope's default image, Ubuntu 22.04, has 3.10 as
    python3 but its own python3.11 package in universe: that one is installed and used (a
    venv of it holds the toolchain). An image with neither stops with what to choose.
    ``GRADERS_VENV`` replaces the venv's place. ``GRADERS_TORCH_INDEX``, where set, is the
    index torch is installed from (``--index-url``): the operator points it at PyTorch's
    CPU wheel index for the CPU build; unset, pip's configured index serves torch (on Linux,
    PyPI's torch is a CUDA build of several GB, which runs on the CPU too). No package host
    is written here (issue 38)."""
    v = pins()
    rest = " ".join(f"{name}=={v[name]}" for name in TOOLCHAIN if name != "torch")
    return f"""\
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
VENV="${{GRADERS_VENV:-{VENV}}}"
apt-get update
# bubblewrap: the sandbox, used where the container allows user namespaces
apt-get install -y --no-install-recommends bubblewrap ca-certificates
if python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  PYTHON=python3
  apt-get install -y --no-install-recommends python3-venv
elif apt-cache show python3.11-venv >/dev/null 2>&1; then
  # Ubuntu 22.04 (Gradescope's default image): python3 is 3.10, python3.11 a package of its own
  PYTHON=python3.11
  apt-get install -y --no-install-recommends python3.11 python3.11-venv
else
  echo "the graders need Python 3.11 or newer, and this image has neither it nor a python3.11 package: choose Gradescope's Ubuntu 22.04 base image, or build the image yourself (docs/integrations.md, manual Docker)" >&2
  exit 1
fi
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --upgrade pip
# torch from GRADERS_TORCH_INDEX where it is set (PyTorch's CPU wheel index for the CPU
# build), else from pip's configured index (PyPI's Linux torch is a CUDA build of several GB)
if [ -n "${{GRADERS_TORCH_INDEX:-}}" ]; then
  "$VENV/bin/python" -m pip install --index-url "$GRADERS_TORCH_INDEX" torch=={v['torch']}
else
  "$VENV/bin/python" -m pip install torch=={v['torch']}
fi
# triton {v['triton']}'s CPU interpreter breaks with numpy >= 2.3
"$VENV/bin/python" -m pip install {rest}
# the job uid that runs a submission where bubblewrap cannot must read these
chmod -R o+rX "$(dirname "$VENV")"
TRITON_INTERPRET=1 "$VENV/bin/python" -c "import numpy, torch, triton; print('toolchain:', torch.__version__, triton.__version__, numpy.__version__)"
"""


def copy_grader(exercise: str, dest: Path) -> None:
    """The engine and one exercise under ``dest`` (as graders/ and exercises/<name>/)."""
    spec = get_exercise(exercise)
    shutil.copytree(REPO_ROOT / "graders", dest / "graders", ignore=_SKIP)
    shutil.copytree(spec.folder, dest / "exercises" / spec.name, ignore=_SKIP)


def write_secret(dest: Path, secret: str | None, name: str = SECRET_NAME) -> Path:
    """The key the students' parameters are derived with (graders.engine.params.derive): the one
    given (a course that wants the numbers its own server shows passes COURSE_SECRET), or a
    new random one. Readable by root alone, so a submission cannot compute anyone's."""
    path = dest / name
    path.write_text((secret or secrets.token_hex(32)).strip() + "\n")
    path.chmod(0o600)
    return path


def protect_secret(folder: Path, name: str = SECRET_NAME) -> None:
    """The key readable by root alone, whatever the platform's unpacking left: done before
    anything of a submission runs (a job uid sees the container's files)."""
    try:
        (folder / name).chmod(0o600)
    except FileNotFoundError:
        pass


def read_secret(folder: Path) -> str | None:
    try:
        return (folder / SECRET_NAME).read_text().strip() or None
    except OSError:
        return None
