"""The runner's torch guard (graders/runner/guard.py) without torch's Dynamo.

torch wraps a dispatch mode's ``__torch_dispatch__`` so that Dynamo keeps out of its frames,
and that wrapper imports Dynamo (800 modules, 1.1 s of CPU) on its first call: in every
runner, before any check. The guard keeps Dynamo out itself, once something else has loaded
it. Each case runs in a fresh Python, as a runner does (pytest's process may hold Dynamo).
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

CALL = r"""
import json, sys
{before}
import torch
from graders.runner import guard

path = "submission.py"
with guard.guarded_call(guard.CallGuard(path), "cpu"):
    x = torch.ones(4)
    y = torch.empty_like(x)  # allocation: allowed
refused = ""
try:
    with guard.guarded_call(guard.CallGuard(path), "cpu"):
        torch.exp(x)  # torch math: refused
except guard.TorchMathRejected as exc:
    refused = str(exc)
print(json.dumps({"dynamo": "torch._dynamo" in sys.modules, "sympy": "sympy" in sys.modules,
                  "refused": refused}))
"""


def _run(before: str = "") -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", CALL.replace("{before}", before)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_a_guarded_call_does_not_load_dynamo_and_still_refuses_torch_math():
    seen = _run()
    assert seen["dynamo"] is False and seen["sympy"] is False
    assert "aten.exp" in seen["refused"]


@pytest.mark.parametrize("before", ["import torch._dynamo"])
def test_with_dynamo_loaded_the_guard_goes_through_its_disabled_frames(before):
    seen = _run(before)
    assert seen["dynamo"] is True
    assert "aten.exp" in seen["refused"]
