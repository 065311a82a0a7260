"""Issue 43: Triton's version key is worked out once by the grader and handed to each
runner, which hashed Triton's files at its first compile (0.9 s on the H200)."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

from graders.isolation.launch import runner_env
from graders.shared.protocol import TRITON_KEY_ENV


def test_the_key_handed_to_runners_is_the_one_triton_works_out_itself():
    handed = runner_env().get(TRITON_KEY_ENV)
    own = subprocess.run([sys.executable, "-c", "from triton.runtime.cache import triton_key; "
                          "print(triton_key())"], capture_output=True, text=True, timeout=120)
    assert own.returncode == 0, own.stderr
    assert handed and handed == own.stdout.strip()


def test_a_runner_compiles_under_the_handed_key_without_hashing_triton_again():
    program = (
        "import sys, triton, triton.runtime.cache as cache, triton.runtime.autotuner as tuner\n"
        "from graders.runner.main import adopt_triton_key\n"
        "hashed = []\n"
        "cache.triton_key.cache_clear()\n"
        "real = cache.triton_key\n"
        "adopt_triton_key('3.6.0-handed')\n"
        "assert cache.triton_key() == tuner.triton_key() == '3.6.0-handed'\n"
        "assert real.cache_info().currsize == 0  # Triton's own never ran\n"
        "adopt_triton_key('bad\\nkey')  # not printable: ignored\n"
        "assert cache.triton_key() == '3.6.0-handed'\n")
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
