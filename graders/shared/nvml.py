"""The driver's figures through NVML in this process (``nvidia-ml-py``), where it loads.

Why not ``nvidia-smi``: every reading of it starts a process that loads and initialises
NVML again (~0.1 s of a core, and a round of driver calls), and the trusted side read it
often: each slot's watch of its jobs' GPU memory twice a second while any call runs, and
the GPU's clocks at the end of every timing, while the grading held the GPU alone. Here
NVML is initialised once per process and each reading is a few driver calls.

Every function answers None where NVML is not there (no driver, no library: the CPU
machines) or will not say; the callers then ask ``nvidia-smi`` as before. GPUs are
numbered as nvidia-smi's ``--id`` numbers them (NVML's own order), so the two agree.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger(__name__)

_lock = threading.Lock()
_state: dict[str, Any] = {"nvml": None, "tried": False}


def _nvml():
    """The initialised ``pynvml`` module, or None; tried once per process."""
    with _lock:
        if not _state["tried"]:
            _state["tried"] = True
            try:
                import pynvml

                pynvml.nvmlInit()
                _state["nvml"] = pynvml
            except Exception as exc:  # noqa: BLE001 - no library, no driver: nvidia-smi then
                log.debug("NVML not used (%s): nvidia-smi is asked instead", exc)
        return _state["nvml"]


def forget() -> None:
    """Tried again at the next reading (the tests swap the module)."""
    with _lock:
        _state.update(nvml=None, tried=False)


def _ask(gpu_index: int, read):
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        return read(nvml, nvml.nvmlDeviceGetHandleByIndex(gpu_index))
    except Exception as exc:  # noqa: BLE001 - NVMLError and its kin: the caller falls back
        log.debug("NVML reading of GPU %s failed: %s", gpu_index, exc)
        return None


def compute_apps(gpu_index: int) -> dict[int, int] | None:
    """GPU memory in bytes per process with a context on the GPU; a process the driver will
    not measure is left out (as nvidia-smi's "[N/A]" rows are)."""
    def read(nvml, handle):
        out: dict[int, int] = {}
        for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
            used = getattr(p, "usedGpuMemory", None)
            if isinstance(used, int) and used >= 0:
                out[int(p.pid)] = out.get(int(p.pid), 0) + used
        return out
    return _ask(gpu_index, read)


def memory(gpu_index: int) -> tuple[int, int] | None:
    """(used, total) bytes of the GPU's memory. The v2 figures where the driver has them:
    their ``used`` leaves out what the driver reserves for itself, as nvidia-smi's
    ``memory.used`` does."""
    def read(nvml, handle):
        try:
            info = nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
        except Exception:  # noqa: BLE001 - an older driver: v1 (reserved counted as used)
            info = nvml.nvmlDeviceGetMemoryInfo(handle)
        return int(info.used), int(info.total)
    return _ask(gpu_index, read)


def clocks(gpu_index: int) -> tuple[str, ...] | None:
    """The values of ``nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.max.sm,
    clocks.max.mem,power.draw,temperature.gpu --format=csv,nounits``, in that order (the
    names are graders.shared.gpuinfo's): MHz, W (two decimals) and °C, as strings."""
    def read(nvml, handle):
        return (str(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                str(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
                str(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)),
                str(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM)),
                f"{nvml.nvmlDeviceGetPowerUsage(handle) / 1000:.2f}",
                str(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)))
    return _ask(gpu_index, read)
