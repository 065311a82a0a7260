"""Tuning: safe softmax shapes below copy (1024×32768 bf16/f32, bf16 square and 1024-wide)."""
import importlib.util
import sys

import torch

sys.path.insert(0, ".")
from graders.bench import time_in_process
from graders.engine.spec import PerfShape
from graders.shared.perfinputs import InputRecipe


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

safe = load("reference_solutions/safe_softmax/solution.py", "safe")
online = load("reference_solutions/online_softmax/solution.py", "online")

def persistent(chunk, warps):
    def f(x):
        online.PERSISTENT_CHUNK, online.PERSISTENT_WARPS = chunk, warps
        y = torch.empty_like(x)
        assert online._persistent_softmax(x, y)
        return y
    return f

def single(warps):
    def f(x):
        old = safe._num_warps
        safe._num_warps = lambda n: warps if n >= 16384 else old(n)
        try:
            return safe.softmax(x)
        finally:
            safe._num_warps = old
    return f

for rows, cols, dt in [(1024, 32768, "bfloat16"), (1024, 32768, "float32"), (4096, 4096, "bfloat16"), (32768, 1024, "bfloat16")]:
    shape = PerfShape("f", (InputRecipe("x", "uniform", rows, cols, dt),), ("@x",), {}, f"{rows}x{cols} {dt}")
    x = (torch.randn(rows, cols, device="cuda") * 3).to(getattr(torch, dt))
    ref = torch.softmax(x.double(), -1)
    variants = [("reference", safe.softmax)]
    if cols >= 16384:
        variants += [(f"single w{w}", single(w)) for w in (8, 32)]
        variants += [(f"persistent c{c} w{w}", persistent(c, w)) for c in (2048, 4096, 8192) for w in (4, 8)]
    for name, fn in variants:
        try:
            y = fn(x); torch.cuda.synchronize()
            err = ((y.double() - ref).abs() / (ref.abs() + 1e-30)).max().item()
            r = time_in_process(torch, fn, shape)
            print(f"{shape.label:<20} {name:<22} err {err:.1e}  {r['ms']:.4f} ms {r['gbs']:6.0f} GB/s copy {r['copy_gbs']:6.0f} frac {r['fraction']:.3f} spread {r['spread']:.3f}", flush=True)
        except Exception as exc:
            print(f"{shape.label:<20} {name:<22} FAILED {type(exc).__name__}: {str(exc)[:200]}", flush=True)
