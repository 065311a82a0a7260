"""What the trusted side can learn about a GPU without torch: nvidia-smi, if present."""

from __future__ import annotations

import shutil
import subprocess

_FIELDS = ("clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "power.draw",
           "temperature.gpu")


def clocks(gpu_index: int | None) -> dict[str, str]:
    """SM and memory clocks (MHz), their maxima, power and temperature; {} if unknown."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {}
    cmd = [smi, f"--query-gpu={','.join(_FIELDS)}", "--format=csv,noheader,nounits"]
    if gpu_index is not None:
        cmd.append(f"--id={gpu_index}")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in out.strip().splitlines()[0].split(",")] if out.strip() else []
    return dict(zip(_FIELDS, values)) if len(values) == len(_FIELDS) else {}
