"""Issue 41: the CPU judges a kernel's resources as the GPU does.

Each resource rule, the fixture that shows it, and what the H200 decided (measured there on
2026-12-03, triton 3.6.0, with ``python3 tests/resource_probe.py cuda``; the CPU path must
give the same, and the GPU test below holds the GPU to it too):

| rule | fixture (tests/resource_probe.py's case; a whole submission) | the H200 |
|---|---|---|
| block elements | a 131072-column row in one block; `from_scratch/row_per_program.py` | refused before compiling (graders/runner/blocks.py) |
| shared memory by stages | 4 stages over a 32768 float32 row; `from_scratch/tutorial_four_stages.py` (poisoned_row, long_rows) | `OutOfResources`: 393,248 > 232,448 bytes |
| no shared memory | a 1-column float16 block; `tutorial_four_stages.py` (tiny_rows: its occupancy divides by it) | `metadata.shared` 0 |
| registers | every case: `n_regs` as the driver reports it | 14, 64, 255, 200 |
| spills | an 8192 float32 block on one warp | `n_spills` 118 (words of local memory a thread) |
| the compiled figures a submission reads | `warmup()`'s handle: `n_regs`, `n_spills`, `metadata.shared`, `metadata.num_warps` | as above |

The whole submissions are graded by the selftest on both devices (CI runs the CPU's; the
GPU tests run the H200's): `tutorial_four_stages.py` fails poisoned_row, long_rows and
tiny_rows on both, in the same words.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO

SHARED_OVERFLOW = ("out of resource: shared memory, Required: 393248, Hardware limit: 232448. "
                   "Reducing block sizes or `num_stages` may help.")
H200 = {
    "shared memory by stages: 4 over a 32768 float32 row":
        {"raised": "OutOfResources", "message": SHARED_OVERFLOW},
    "no shared memory: a 1-column float16 block":
        {"shared": 0, "n_regs": 14, "n_spills": 0, "num_warps": 8},
    "registers and shared memory: 4096 float32, 4 warps, 2 stages":
        {"shared": 16400, "n_regs": 64, "n_spills": 0, "num_warps": 4},
    "spills: an 8192 float32 block on one warp":
        {"shared": 0, "n_regs": 255, "n_spills": 118, "num_warps": 1},
    "one stage: a 32768 float32 row in shared memory for the reduction only":
        {"shared": 32, "n_regs": 200, "n_spills": 0, "num_warps": 8},
    "block elements: a 131072-column row in one block":
        {"raised": "BlockTooLarge", "message": "at 3:11:"},
}


def probe(device: str) -> dict[str, dict]:
    done = subprocess.run([sys.executable, str(REPO / "tests" / "resource_probe.py"), device],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {row.pop("case"): row for row in rows}


def test_the_cpu_hands_a_kernel_what_the_h200_compiler_decided():
    """Fails where the CPU path keeps its old stand-ins (32 registers, 1024 bytes of shared
    memory, no refusal): every figure and every refusal must be the H200's."""
    assert probe("cpu") == H200


@pytest.mark.gpu
def test_the_gpu_still_decides_what_the_table_says():
    assert probe("cuda") == H200
