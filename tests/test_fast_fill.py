"""The timed inputs' one-kernel fill (graders.runner.fast_fill) against torch's fill, under
Triton's CPU interpreter: the same bits where the interpreter converts as the GPU does, and
back on torch's fill, for good, where the kernel's rows differ or it fails.

The interpreter rounds float32 to bfloat16 toward zero where the GPU rounds to nearest
(triton 3.6), so bfloat16 is the interpreter's own case of a kernel that disagrees; on the
GPU the timing reply's ``fill`` says which fill ran (tests/test_gpu.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, torch
from graders.runner import fast_fill
from graders.shared import perfinputs
from graders.shared.perfinputs import InputRecipe

def fresh():
    fast_fill.state["fill"] = "triton"
    fast_fill._checked.clear()

def same(name, rows, cols, seed, lo=-4.0, hi=4.0):
    r = InputRecipe("x", "uniform", rows, cols, name, lo, hi)
    out = torch.empty(r.shape, dtype=perfinputs.torch_dtype(torch, name))
    fast_fill.fill(torch, out, r, seed)
    want = torch.empty_like(out)
    perfinputs.fill(torch, want, r, seed)
    return bool(torch.equal(out, want))

seen = {}
# seeds at both ends of 32 bits (one int32 signature for all), a tail past the last block
seen["float32"] = [same("float32", rows, cols, seed) for rows, cols in ((3, 4096), (5, 2999))
                   for seed in (0, 1, 2**31 - 1, 2**31, 2**32 - 1)]
seen["float32 range"] = same("float32", 2, 1000, 7, lo=-0.3, hi=11.7)
seen["float32 state"] = fast_fill.state["fill"]
seen["float16"] = [same("float16", 4, 3000, seed) for seed in (5, 2**32 - 2)]
seen["float16 state"] = fast_fill.state["fill"]

fresh()
seen["bfloat16 result"] = same("bfloat16", 4, 4096, 9)
seen["bfloat16 state"] = fast_fill.state["fill"]
seen["after it, float32"] = same("float32", 3, 4096, 11)

class Broken:  # a launch that raises
    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            raise RuntimeError("no launcher")
        return launch
fresh()
fast_fill._kernel = Broken()
seen["broken result"] = same("float32", 3, 100, 3)
seen["broken state"] = fast_fill.state["fill"]

class Zeros:  # a launch that writes the wrong values
    def __getitem__(self, grid):
        return lambda out, *args, **kwargs: out.zero_()
fresh()
fast_fill._kernel = Zeros()
seen["zeros result"] = same("float32", 3, 100, 3)
seen["zeros state"] = fast_fill.state["fill"]
# other inputs than uniform, and non-contiguous ones, are torch's
fresh()
mask = InputRecipe("m", "prefix_mask", 3, 100)
out = torch.empty(mask.shape)
fast_fill.fill(torch, out, mask, 3)
want = torch.empty_like(out)
perfinputs.fill(torch, want, mask, 3)
seen["mask"] = bool(torch.equal(out, want)) and fast_fill.state["fill"] == "triton"
print(json.dumps(seen))
"""


def test_the_one_kernel_fill_makes_torchs_bits_and_falls_back_where_it_does_not():
    env = dict(os.environ, PYTHONPATH=str(REPO), TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["float32"] == [True] * 10
    assert seen["float32 range"] is True
    assert seen["float32 state"] == "triton"
    assert seen["float16"] == [True, True] and seen["float16 state"] == "triton"
    # triton 3.6's interpreter rounds to bfloat16 toward zero: the rows differ, the input is
    # torch's all the same, and so is every one after (a later interpreter may round as the
    # GPU does; then the kernel's fill stands)
    assert seen["bfloat16 result"] is True
    assert seen["bfloat16 state"] == "triton" or seen["bfloat16 state"].startswith(
        "torch: the kernel's bfloat16 rows differed")
    assert seen["after it, float32"] is True
    assert seen["broken result"] is True
    assert seen["broken state"].startswith("torch: the kernel failed (RuntimeError")
    assert seen["zeros result"] is True
    assert seen["zeros state"].startswith("torch: the kernel's float32 rows differed")
    assert seen["mask"] is True
