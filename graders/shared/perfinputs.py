"""Inputs for timed calls, made the same way on the GPU (torch) and on the host (numpy).

Timed shapes are large (a 64×1048576 float32 input is 256 MiB) and every timed call
must read fresh values, so the checker cannot ship them down the pipe. Instead both
sides compute them from a counter-based hash of (seed, element index): the runner
fills its GPU buffers with torch, and the checker recomputes, with numpy, exactly
the rows it later asks to see. The submission never learns which rows those are.

The hash is murmur3's 32-bit finaliser on ``index * golden + seed``, kept in int64
arithmetic masked to 32 bits so that torch (signed, wrapping) and numpy agree bit
for bit. Values go float64 -> float32 -> dtype on both sides, so bfloat16 rounds
once, the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from graders.shared.arrays import HostArray, from_f64

M32 = 0xFFFFFFFF
GOLDEN = 0x9E3779B1
KINDS = ("uniform", "prefix_mask", "class_index")


@dataclass(frozen=True)
class InputRecipe:
    """One input of a timed call: a [rows, cols] array of ``dtype`` made by ``kind``.

    ``uniform``: values uniform in [lo, hi).
    ``prefix_mask``: an additive mask, 0.0 for the first n_r columns of row r and -inf
    after them, n_r in [1, cols] from the hash (a padding mask: no row fully masked).
    ``class_index``: an int64 vector of ``rows`` class indices, each in [0, cols) from the
    hash (a classifier's targets: one column of each row of the logits); its rows are
    single values.
    """

    name: str
    kind: str
    rows: int
    cols: int
    dtype: str = "float32"
    lo: float = -4.0
    hi: float = 4.0

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.rows,) if self.kind == "class_index" else (self.rows, self.cols)

    @property
    def nbytes(self) -> int:
        if self.kind == "class_index":
            return self.rows * 8
        return self.rows * self.cols * (4 if self.dtype == "float32" else 2)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "rows": self.rows, "cols": self.cols,
                "dtype": self.dtype, "lo": self.lo, "hi": self.hi}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "InputRecipe":
        if d["kind"] not in KINDS:
            raise ValueError(f"unknown input kind {d['kind']!r}")
        return cls(str(d["name"]), str(d["kind"]), int(d["rows"]), int(d["cols"]),
                   str(d["dtype"]), float(d["lo"]), float(d["hi"]))


def call_seed(base: int, call_index: int, input_index: int) -> int:
    """The 32-bit seed of one input of one timed call."""
    return _fmix_int((base * 1_000_003 + call_index * 131 + input_index) & M32)


def _fmix_int(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    h ^= h >> 16
    return h


def _fmix(h, xp_and):
    h = h ^ (h >> 16)
    h = xp_and(h * 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = xp_and(h * 0xC2B2AE35)
    return h ^ (h >> 16)


# -- numpy (the checker) -------------------------------------------------------------------
def host_rows(recipe: InputRecipe, seed: int, rows: np.ndarray) -> HostArray:
    """The given rows of the input, as the runner made them."""
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.arange(recipe.cols, dtype=np.int64)
    if recipe.kind == "class_index":  # one value a row, as a one-column row
        return HostArray((_np_hash(rows, seed) % recipe.cols).reshape(-1, 1), "int64")
    if recipe.kind == "prefix_mask":
        n = _np_hash(rows, seed) % recipe.cols + 1
        values = np.where(cols[None, :] < n[:, None], 0.0, -np.inf)
    else:
        idx = rows[:, None] * recipe.cols + cols[None, :]
        u = _np_hash(idx, seed).astype(np.float64) / 2.0**32
        values = recipe.lo + (recipe.hi - recipe.lo) * u
    values = values.astype(np.float32).astype(np.float64)
    return from_f64(values, recipe.dtype)


def _np_hash(idx: np.ndarray, seed: int) -> np.ndarray:
    # numpy's uint32 arithmetic wraps modulo 2**32, which is the mask the torch side applies
    # to its int64 values: the same bits with half the bytes and no masking, about 4x faster
    # on the checker's rows (a 1048576-column row is checked for every timed call)
    h = idx.astype(np.uint32) * np.uint32(GOLDEN) + np.uint32(seed)
    return _fmix(h, lambda v: v).astype(np.int64)


# -- torch (the runner) --------------------------------------------------------------------
def fill(torch, out, recipe: InputRecipe, seed: int) -> None:
    """Write the whole input into the existing tensor ``out`` (no new allocation kept)."""
    device = out.device
    if recipe.kind == "class_index":
        rows = torch.arange(recipe.rows, dtype=torch.int64, device=device)
        out.copy_(_torch_hash(torch, rows, seed) % recipe.cols)
        return
    if recipe.kind == "prefix_mask":
        rows = torch.arange(recipe.rows, dtype=torch.int64, device=device)
        n = _torch_hash(torch, rows, seed) % recipe.cols + 1
        cols = torch.arange(recipe.cols, dtype=torch.int64, device=device)
        keep = cols[None, :] < n[:, None]
        zero = torch.zeros((), dtype=torch.float32, device=device)
        ninf = torch.full((), float("-inf"), dtype=torch.float32, device=device)
        out.copy_(torch.where(keep, zero, ninf).to(out.dtype))
        return
    # row by row in slabs: the int64 temporaries of a 256 MiB input would be 4x its size
    slab = max(1, (1 << 24) // recipe.cols)
    for r0 in range(0, recipe.rows, slab):
        r1 = min(recipe.rows, r0 + slab)
        idx = torch.arange(r0 * recipe.cols, r1 * recipe.cols, dtype=torch.int64, device=device)
        out[r0:r1].copy_(_uniform(torch, idx, recipe, seed).view(r1 - r0, recipe.cols))


def uniform_rows(torch, recipe: InputRecipe, seed: int, rows: list[int], device) -> Any:
    """The given rows of a ``uniform`` input, made as ``fill`` makes them (the runner's own
    check of its fast fill, graders.runner.fast_fill)."""
    r = torch.tensor(rows, dtype=torch.int64, device=device)
    cols = torch.arange(recipe.cols, dtype=torch.int64, device=device)
    return _uniform(torch, (r[:, None] * recipe.cols + cols[None, :]).reshape(-1), recipe,
                    seed).view(len(rows), recipe.cols)


def _uniform(torch, idx, recipe: InputRecipe, seed: int):
    u = _torch_hash(torch, idx, seed).to(torch.float64) / 2.0**32
    v = (recipe.lo + (recipe.hi - recipe.lo) * u).to(torch.float32)
    return v.to(torch_dtype(torch, recipe.dtype))


def _torch_hash(torch, idx, seed: int):
    h = (idx * GOLDEN + seed) & M32
    return _fmix(h, lambda v: v & M32)


def torch_dtype(torch, name: str):
    return {"float32": torch.float32, "float16": torch.float16,
            "bfloat16": torch.bfloat16, "int64": torch.int64}[name]
