"""From a student's HIP file to CUDA C++ that NVRTC compiles, and back to their lines.

NVRTC has no include path and no ``INFINITY``. HIP device code differs from CUDA's in a
few spellings (``__shfl_xor`` without a mask, ``hipThreadIdx_x``, ...). The prelude
defines those, the student's ``#include`` lines of standard and HIP headers become blank
lines (the prelude stands in for them), and ``#line 1 "<name>"`` makes every diagnostic
name the student's file and line. ``warpSize`` stays the device's run-time value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PRELUDE = r"""
// ---- graders/hip/source.py: HIP device spellings on CUDA (NVRTC) ----
#define __HIP_PLATFORM_NVIDIA__ 1
#define __HIP__ 1
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#ifndef FLT_MAX
#define FLT_MAX 3.402823466e+38F
#endif
#ifndef FLT_MIN
#define FLT_MIN 1.175494351e-38F
#endif
typedef unsigned int uint32_t;
typedef int int32_t;
typedef unsigned long long uint64_t;
typedef long long int64_t;
#define hipThreadIdx_x threadIdx.x
#define hipThreadIdx_y threadIdx.y
#define hipBlockIdx_x blockIdx.x
#define hipBlockIdx_y blockIdx.y
#define hipBlockDim_x blockDim.x
#define hipBlockDim_y blockDim.y
#define hipGridDim_x gridDim.x
#define hipGridDim_y gridDim.y
// HIP's shuffles take no lane mask: every lane of the warp takes part
__device__ inline float __shfl_xor(float v, int lane_mask, int width = warpSize) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, width); }
__device__ inline int __shfl_xor(int v, int lane_mask, int width = warpSize) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, width); }
__device__ inline float __shfl_down(float v, unsigned int delta, int width = warpSize) {
  return __shfl_down_sync(0xffffffffu, v, delta, width); }
__device__ inline int __shfl_down(int v, unsigned int delta, int width = warpSize) {
  return __shfl_down_sync(0xffffffffu, v, delta, width); }
__device__ inline float __shfl_up(float v, unsigned int delta, int width = warpSize) {
  return __shfl_up_sync(0xffffffffu, v, delta, width); }
__device__ inline float __shfl(float v, int src_lane, int width = warpSize) {
  return __shfl_sync(0xffffffffu, v, src_lane, width); }
__device__ inline int __shfl(int v, int src_lane, int width = warpSize) {
  return __shfl_sync(0xffffffffu, v, src_lane, width); }
"""

# headers the prelude stands in for; any other #include reaches NVRTC and fails there,
# on the student's line
_KNOWN_HEADERS = {"hip/hip_runtime.h", "hip/hip_runtime_api.h", "hip/math_functions.h",
                  "cuda_runtime.h", "math.h", "cmath", "float.h", "cfloat", "stdint.h",
                  "cstdint", "limits.h", "climits", "stdio.h", "cstdio"}
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def prepare(source: str, filename: str) -> str:
    """The text handed to NVRTC: prelude, then the student's file with its own numbering."""
    lines = []
    for line in source.splitlines():
        match = _INCLUDE.match(line)
        lines.append("" if match and match.group(1) in _KNOWN_HEADERS else line)
    name = filename.replace("\\", "/").replace('"', "")
    return PRELUDE + f'#line 1 "{name}"\n' + "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Diagnostic:
    line: int | None
    severity: str  # "error" | "warning"
    message: str


_DIAG = re.compile(r'^(?P<file>[^()\n]*)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|'
                   r'warning)[^:]*: (?P<msg>.*)$')


def parse_log(log: str, filename: str) -> list[Diagnostic]:
    """Errors and warnings from an NVRTC log; lines outside the student's file get None."""
    out = []
    name = filename.replace("\\", "/")
    for raw in log.splitlines():
        m = _DIAG.match(raw.strip())
        if not m:
            continue
        line = int(m.group("line")) if m.group("file").endswith(name) else None
        severity = "warning" if m.group("sev") == "warning" else "error"
        out.append(Diagnostic(line, severity, m.group("msg").strip()))
    return out


def first_error(diagnostics: list[Diagnostic]) -> Diagnostic | None:
    errors = [d for d in diagnostics if d.severity == "error"]
    return errors[0] if errors else None
