"""Host arrays in the dtypes kernels use, with numpy alone.

The trusted side never imports torch, so bfloat16 lives here as its raw 16 bits
(``uint16``) next to a logical dtype name. Values are rounded to the logical
dtype when an input is made, so the float64 reference is computed from exactly
the numbers the kernel reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# logical dtype -> numpy storage dtype
STORAGE = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(np.uint16),  # raw bits
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
}
FLOAT_DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class HostArray:
    """An array as it crosses between checker and runner: storage plus logical dtype."""

    data: np.ndarray  # C-contiguous, dtype STORAGE[dtype]
    dtype: str

    def __post_init__(self) -> None:
        if self.dtype not in STORAGE:
            raise ValueError(f"unsupported dtype {self.dtype!r}")
        if self.data.dtype != STORAGE[self.dtype]:
            raise ValueError(f"{self.dtype} needs storage {STORAGE[self.dtype]}, got {self.data.dtype}")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    def to_f64(self) -> np.ndarray:
        return to_f64(self.data, self.dtype)


def _f32_to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (round to nearest even), returning the 16 bits."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    nan = np.isnan(values)
    rounding_bias = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    rounded = ((bits + rounding_bias) >> 16).astype(np.uint16)
    # keep NaN a NaN (the bias could carry it into inf)
    return np.where(nan, np.uint16(0x7FC0), rounded).astype(np.uint16)


def from_f64(values: np.ndarray, dtype: str) -> HostArray:
    """Round float64 values to ``dtype`` and keep them in storage form."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == "bfloat16":
            data = _f32_to_bf16_bits(values.astype(np.float32))
        else:
            data = values.astype(STORAGE[dtype])
    return HostArray(np.ascontiguousarray(data), dtype)


def to_f64(data: np.ndarray, dtype: str) -> np.ndarray:
    """Storage form -> float64 values."""
    if dtype == "bfloat16":
        return (data.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return data.astype(np.float64)
