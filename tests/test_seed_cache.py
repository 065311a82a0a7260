"""The slot's seed cache holds the grader's kernel, not Triton's host stubs
(graders.isolation.seed_cache).

On the H200 a runner that loaded the seed's cuda_utils (built outside the sandbox) crashed
with SIGSEGV while warming up; the GPU tests show the runners since (tests/test_gpu.py).
"""

from graders.isolation.seed_cache import strip_host_stubs


def test_the_seed_keeps_the_kernel_and_drops_the_host_stubs(tmp_path):
    kernel = tmp_path / "AAEF5UZ"
    kernel.mkdir()
    for name in ("_row_logsumexp.cubin", "_row_logsumexp.json", "__grp___row_logsumexp.json"):
        (kernel / name).write_bytes(b"k")
    driver = tmp_path / "XU5DT2A"
    driver.mkdir()
    (driver / "cuda_utils.cpython-312-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    launcher = tmp_path / "3NW4CBF"
    launcher.mkdir()
    (launcher / "__triton_launcher.cpython-312-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")

    strip_host_stubs(tmp_path)

    assert sorted(p.name for p in tmp_path.iterdir()) == ["AAEF5UZ"]
    assert len(list(kernel.iterdir())) == 3
