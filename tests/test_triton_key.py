"""Issue 43: Triton's version key is worked out once by the grader and handed to each
runner, which hashed Triton's files at its first compile (0.9 s on the H200)."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO

from graders.isolation import RunnerPool, default_launcher
from graders.isolation.triton_key import key_for, triton_key
from graders.shared.vocabulary import Device


def run_program(program: str, env: dict[str, str] | None = None) -> None:
    """``program`` in a python of its own from the repository root; its asserts must hold."""
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]


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
    run_program(program)


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
    run_program(program, env={**os.environ, "TRITON_CACHE_DIR": str(tmp_path)})


def test_the_key_is_kept_on_disk_and_worked_out_again_only_when_triton_changes(tmp_path):
    """Every grader process paid 0.6-0.9 s for the key before its first runner warmed up;
    it is kept beside a fingerprint of Triton's files and read back while they hold."""
    root = tmp_path / "triton"
    (root / "_C").mkdir(parents=True)
    (root / "_C" / "libtriton.so").write_bytes(b"\0" * 64)
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.pyc").write_bytes(b"bytecode")
    compiler = root / "compiler" / "compiler.py"
    compiler.parent.mkdir()
    compiler.write_text("x = 1\n")
    cache = tmp_path / "cache"
    asked = []

    def work_out():
        asked.append(1)
        return f"3.6.0-key{len(asked)}"

    assert key_for(root, work_out, cache) == "3.6.0-key1"
    assert key_for(root, work_out, cache) == "3.6.0-key1"  # read back
    (root / "__pycache__" / "y.pyc").write_bytes(b"more")  # bytecode is not Triton's source
    assert key_for(root, work_out, cache) == "3.6.0-key1"
    assert len(asked) == 1
    compiler.write_text("x = 22\n")  # an upgrade: another file
    assert key_for(root, work_out, cache) == "3.6.0-key2"
    assert len(asked) == 2
    kept = list(cache.glob("triton-key-*.txt"))
    assert [p.read_text() for p in kept] == ["3.6.0-key2"]  # the earlier Triton's is gone
    kept[0].write_text("bad\nkey")  # not a key a runner takes: worked out again
    assert key_for(root, work_out, cache) == "3.6.0-key3"
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert key_for(root, work_out, blocked / "cache") == "3.6.0-key4"  # not kept, still told
    assert key_for(root, lambda: None, tmp_path / "empty") is None
    assert not list((tmp_path / "empty").glob("*"))


def test_the_installed_triton_is_found_without_importing_it():
    program = ("import sys\nfrom graders.isolation.triton_key import triton_root, fingerprint\n"
               "root = triton_root()\n"
               "assert 'triton' not in sys.modules\n"
               "assert (root / '_C').is_dir() and (root / 'runtime' / 'cache.py').is_file()\n"
               "assert fingerprint(root) == fingerprint(root)\n")
    run_program(program)
