"""GPU runs of the same graders (skipped without an NVIDIA GPU)."""

import json

import pytest

from conftest import REPO, run_cli

pytestmark = pytest.mark.gpu


def test_reference_passes_on_cuda():
    ref = REPO / "reference_solutions" / "safe_softmax" / "solution.py"
    proc = run_cli("grade", "safe_softmax", str(ref), "--device", "cuda", "--json")
    result = json.loads(proc.stdout)
    assert result["verdict"] == "passed" and result["device"] == "cuda", proc.stdout[-2000:]


def test_selftest_on_cuda():
    proc = run_cli("selftest", "--device", "cuda", timeout=1800)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
