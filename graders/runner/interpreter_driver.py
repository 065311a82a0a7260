"""A stand-in for Triton's GPU driver under the CPU interpreter.

With ``TRITON_INTERPRET=1`` and no GPU, Triton has no active driver: anything that asks
``triton.runtime.driver.active`` (the tutorial's device properties, ``@triton.autotune``'s
benchmarker) fails with "0 active drivers", so a kernel that runs on the GPU would be a
``compile_error`` on the CPU. This driver answers those questions the way the course's
GPU would, so the CPU and the GPU grade the same file the same way:

* device properties are an H200's (132 SMs, 65536 registers and 232448 bytes of shared
  memory per SM, warps of 32): a grid sized from them is the grid the GPU would get;
* the torch device is the CPU (the grader's tensors live there);
* the autotuner's benchmark runs each config once and reports equal times, so the
  first config that runs is kept: every config still runs once (a config that fails,
  fails here as on the GPU; one the grader skips as too wide per thread is skipped here
  too: graders.runner.blocks), without timing the interpreter.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

H200_PROPERTIES = {
    "max_shared_mem": 232448,
    "max_num_regs": 65536,
    "multiprocessor_count": 132,
    "warpSize": 32,
    "sm_clock_rate": 1980000,
    "mem_clock_rate": 2619000,
    "mem_bus_width": 6144,
}


class _Utils:
    def get_device_properties(self, device: Any = None) -> dict[str, int]:
        return dict(H200_PROPERTIES)


def _run_once(kernel_call: Callable[[], Any], quantiles: Sequence[float] | None = None,
              **_: Any) -> Any:
    """The autotuner's benchmark under the interpreter: run once, report no preference."""
    kernel_call()
    return [0.0] * len(quantiles) if quantiles else 0.0


class _DeviceInterface:
    """What ``triton.testing.do_bench`` asks of ``torch.cuda``, on the host clock."""

    class Event:
        def __init__(self, enable_timing: bool = True):
            self.at = 0.0

        def record(self, stream: Any = None) -> None:
            self.at = time.perf_counter()

        def elapsed_time(self, end: "_DeviceInterface.Event") -> float:
            return (end.at - self.at) * 1e3

    @staticmethod
    def synchronize(device: Any = None) -> None:
        pass


class InterpreterDriver:
    """``triton.runtime.driver.active`` for a runner on the CPU interpreter."""

    def __init__(self) -> None:
        self.utils = _Utils()

    @staticmethod
    def is_active() -> bool:
        return True

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)

    def get_active_torch_device(self):
        import torch

        return torch.device("cpu")

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        pass

    def get_current_stream(self, device: Any = None) -> int:
        return 0

    def get_device_capability(self, device: Any = None) -> tuple[int, int]:
        return (9, 0)

    def get_benchmarker(self) -> Callable[..., Any]:
        return _run_once

    def get_device_interface(self) -> type[_DeviceInterface]:
        return _DeviceInterface

    def get_empty_cache_for_benchmark(self):
        import torch

        return torch.empty(0, dtype=torch.int32)

    def clear_cache(self, cache: Any) -> None:
        pass
