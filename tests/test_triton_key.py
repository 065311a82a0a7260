"""Issue 43: Triton's version key is worked out once by the grader and handed to each
runner, which hashed Triton's files at its first compile (0.9 s on the H200)."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO

from graders.isolation import RunnerPool, default_launcher
from graders.isolation.triton_key import triton_key
from graders.shared.vocabulary import Device


def test_the_key_handed_to_runners_is_the_one_triton_works_out_itself():
    own = subprocess.run([sys.executable, "-c", "from triton.runtime.cache import triton_key; "
                          "print(triton_key())"], capture_output=True, text=True, timeout=120)
    assert own.returncode == 0, own.stderr
    assert triton_key() == own.stdout.strip()
    pool = RunnerPool(Device.CPU, default_launcher(sandbox=True), warm=0)
    ready = pool.take()
    try:  # the runner took it with its warm-up, before any submission
        assert ready.phases["triton_key"] == "handed"
    finally:
        ready.process.close()
        pool.close()


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


def test_a_runner_builds_triton_host_stubs_at_o1_and_they_load(tmp_path):
    """Launchers were built at gcc -O3 in every lane (0.25 s each, 6-9 a grading, on the
    H200); the runner builds them at -O1: the flag comes last, so it is the one gcc uses,
    and the module built still loads."""
    program = (
        "import os, subprocess, triton.runtime.build as build\n"
        "from graders.runner.main import quicker_host_stubs\n"
        "seen = []\n"
        "real = build.subprocess.check_call\n"
        "build.subprocess.check_call = lambda cmd, **kw: (seen.append(cmd), real(cmd, **kw))[1]\n"
        "quicker_host_stubs(); quicker_host_stubs()  # once is enough\n"
        "src = ('#include <Python.h>\\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, '\n"
        "       '\"probe\", NULL, -1, NULL};\\nPyMODINIT_FUNC PyInit_probe(void) '\n"
        "       '{ return PyModule_Create(&m); }\\n')\n"
        "module = build.compile_module_from_src(src, 'probe')\n"
        "assert module.__name__ == 'probe'\n"
        "(cmd,) = seen\n"
        "levels = [flag for flag in cmd if flag.startswith('-O')]\n"
        "assert levels == ['-O3', '-O1'], cmd\n")
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env={**os.environ,
                                                      "TRITON_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
