"""What the trusted side can learn about a GPU without torch: NVML or nvidia-smi, if present."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from graders.shared import nvml

DRIVER_GPUS = Path("/proc/driver/nvidia/gpus")  # one folder per GPU, by PCI address
_FIELDS = ("clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "power.draw",
           "temperature.gpu")


def clocks(gpu_index: int | None) -> dict[str, str]:
    """SM and memory clocks (MHz), their maxima, power and temperature; {} if unknown.
    Read at the end of every timing, with the GPU still the grading's alone: through NVML
    in this process where it loads (milliseconds), else nvidia-smi (a process, ~0.1 s)."""
    read = nvml.clocks(0 if gpu_index is None else gpu_index)
    if read is not None:
        return dict(zip(_FIELDS, read))
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


def cuda_visible_devices(gpu_index: int) -> str:
    """What to put in CUDA_VISIBLE_DEVICES for the GPU whose device node is
    /dev/nvidia<gpu_index>: its UUID, from the driver's /proc files. An index would not
    do inside the sandbox: there only that one node exists, CUDA numbers the GPUs it can
    open from 0, and "1" names none (seen on a two-H200 host: "torch sees no CUDA
    device"). Without the driver's files, the index, as before."""
    for info in sorted(DRIVER_GPUS.glob("*/information")):
        try:
            fields = dict(line.split(":", 1) for line in info.read_text().splitlines()
                          if ":" in line)
        except OSError:
            continue
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        if fields.get("Device Minor") == str(gpu_index) and fields.get("GPU UUID", "").startswith("GPU-"):
            return fields["GPU UUID"]
    return str(gpu_index)
