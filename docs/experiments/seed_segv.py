"""Why a warm runner made after the slot's seed cache crashes with SIGSEGV on the H200
(tests/test_gpu.py::test_runners_made_after_the_seed_cache_compile_nothing_of_their_own).

Makes the seed cache as a slot does, lists it, then copies it into a fresh Triton cache
and launches the known-answer kernel in a plain process with faulthandler on (no
sandbox), with and without the seed, so a crash prints its Python stack."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.getcwd())
from graders.isolation.launch import runner_env  # noqa: E402
from graders.isolation.pool import KNOWN_SHAPE  # noqa: E402
from graders.isolation.seed_cache import make_seed_cache  # noqa: E402

CHILD = """
import faulthandler, os, sys
faulthandler.enable()
sys.path.insert(0, os.getcwd())
from graders.runner.known_answer import compile_from_seed, row_logsumexp
import torch
seed = sys.argv[1] or None
print("compile", compile_from_seed(%d, %d, seed, os.environ["TRITON_CACHE_DIR"]), flush=True)
x = torch.randn(%d, %d, device="cuda")
print("launch", row_logsumexp(x)[:3].tolist(), torch.logsumexp(x, 1)[:3].tolist(), flush=True)
print("cache now", sorted(os.listdir(os.environ["TRITON_CACHE_DIR"])), flush=True)
""" % (*KNOWN_SHAPE, *KNOWN_SHAPE)

seed = make_seed_cache(KNOWN_SHAPE, 0, runner_env())
print("seed cache:", seed)
if seed:
    for path in sorted(seed.rglob("*")):
        print("  ", path.relative_to(seed), path.stat().st_size if path.is_file() else "/")
for label, seed_arg in [("with the seed", str(seed or "")), ("without", ""),
                        ("with the seed, again", str(seed or ""))]:
    home = tempfile.mkdtemp()
    env = dict(runner_env(), TRITON_CACHE_DIR=f"{home}/.triton", HOME=home, TMPDIR=home,
               CUDA_VISIBLE_DEVICES="0")
    proc = subprocess.run([sys.executable, "-I", "-c", CHILD, seed_arg], env=env, cwd=os.getcwd(),
                          capture_output=True, text=True, timeout=120)
    print(f"--- {label}: rc {proc.returncode}\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}")
