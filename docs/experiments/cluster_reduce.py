"""Issue 29: can a Triton 3.6 kernel reduce across the CTAs of a thread-block cluster?

The idea for online 64×1048576: let a cluster's CTAs share the row's (m, s) through
distributed shared memory instead of through global memory and a wait. This script asks the
compiler, for sm_90a, with no GPU needed (Triton compiles for a target it is given):

* triton.language with num_ctas = 1, 2, 4 (num_ctas > 1 is Triton's own cluster launch): a
  1-D and a 2-D block reduced with tl.max, then normalised;
* Gluon (triton.experimental.gluon) with a BlockedLayout split over 2 CTAs (cga_layout),
  reduced with gl.max over the split axis.

Each compilation runs in a process of its own, because a failed MLIR assertion aborts the
process. Run from the repo root:  python3 docs/experiments/cluster_reduce.py
Printed on 2026-12-02 (triton 3.6.0): every num_ctas = 1 kernel compiles; every num_ctas > 1
triton.language kernel fails in TritonGPUPlanCTAPass ("parent layout must have at least rank
>= 2"); the Gluon kernel aborts on `helper.isReduceWithinCTA() && "Unexpected srcLayout in
ReduceOpConversion"`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

CHILD = r'''
import sys
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

kind, ctas = sys.argv[1], int(sys.argv[2])
target = GPUTarget("cuda", 90, 32)


@triton.jit
def one_d(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, tl.exp(x - tl.max(x, 0)))


@triton.jit
def two_d(x_ptr, y_ptr, R: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, BLOCK)[None, :]
    offs = tl.program_id(0) * R * BLOCK + r * BLOCK + c
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, tl.exp(x - tl.max(tl.max(x, 1), 0)))


if kind == "gluon":
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon._runtime import GluonASTSource

    @gluon.jit
    def split(x_ptr, y_ptr, BLOCK: gl.constexpr, LAYOUT: gl.constexpr):
        offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=LAYOUT)
        x = gl.load(x_ptr + offs)
        gl.store(y_ptr + offs, gl.exp(x - gl.max(x, 0)))

    bases = [[1 << i] for i in range(ctas.bit_length() - 1)]  # CTA bits: the lowest columns
    layout = gl.BlockedLayout([8], [32], [4], [0], cga_layout=bases)
    source = GluonASTSource(fn=split, signature={"x_ptr": "*fp32", "y_ptr": "*fp32",
                            "BLOCK": "constexpr", "LAYOUT": "constexpr"},
                            constexprs={"BLOCK": 32768, "LAYOUT": layout})
else:
    fn, consts = (one_d, {"BLOCK": 32768}) if kind == "1d" else (two_d, {"R": 4, "BLOCK": 2048})
    signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", **{k: "constexpr" for k in consts}}
    source = ASTSource(fn=fn, signature=signature, constexprs=consts)
compiled = triton.compile(source, target=target, options={"num_warps": 4, "num_ctas": ctas})
ptx = compiled.asm["ptx"]
print(f"compiled: shared::cluster accesses {ptx.count('shared::cluster')}, "
      f"barrier.cluster {ptx.count('barrier.cluster')}")
'''

WHY = re.compile(r"(Assertion `[^']*' failed|error: (?!Failures)[^\n]*|compiled: [^\n]*)")


def main() -> int:
    # @triton.jit needs its function in a file: the child is written to one
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as child:
        child.write(CHILD)
    try:
        return _probe(child.name)
    finally:
        os.unlink(child.name)


def _probe(child: str) -> int:
    for kind, ctas in [("1d", 1), ("1d", 2), ("1d", 4), ("2d", 1), ("2d", 2), ("2d", 4),
                       ("gluon", 1), ("gluon", 2)]:
        done = subprocess.run([sys.executable, child, kind, str(ctas)],
                              capture_output=True, text=True, timeout=300)
        found = WHY.findall(done.stdout + done.stderr)
        print(f"{kind:>5} num_ctas={ctas}: {found[0] if found else 'exit ' + str(done.returncode)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
