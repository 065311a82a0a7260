"""Feedback that teaches speed (issue 30): each timed shape's time read as bytes per element
against the least the shape needs, in the traffic table's terms; then what the runner says of
the compiled kernels (registers, spills, shared memory, warps, the grid), bounded and worded by
the checker (graders/engine/kernel_words.py); in the JSON, the CLI report and the result page;
never part of the score. The three known fixtures, diagnosed on the H200, are in
tests/test_gpu.py."""

from __future__ import annotations

from graders.engine.kernel_words import kernel_words
from graders.engine.performance import ShapeFigures, speed_diagnosis
from graders.engine.report import render
from graders.engine.results import GradeResult
from graders.runner import kernel_facts
from graders.shared.vocabulary import Verdict


def shape(fraction: float, rows=4096, cols=4096, dtype="float32", least=None) -> ShapeFigures:
    size = 4 if dtype == "float32" else 2
    moved = least if least is not None else 2 * size * rows * cols  # one read, one write
    return ShapeFigures(f"{rows}×{cols} {dtype}", "softmax", rows, cols, dtype, moved,
                        ms=0.1, gbs=1000.0, copy_gbs=1000.0 / fraction, fraction=fraction,
                        spread=0.01, copy_spread=0.01, reps=20)


def test_the_time_of_a_three_pass_kernel_reads_as_the_three_pass_design():
    said = speed_diagnosis(shape(0.5))  # half the copy's speed: twice the least bytes
    assert said["bytes_per_element"] == 16.0 and said["least_bytes_per_element"] == 8.0
    assert said["traversals"] == 4.0
    assert "like the textbook 3-pass design (max, sum, normalise: 3 reads + 1 write)" in said["text"]
    said = speed_diagnosis(shape(0.66))
    assert "like the 2-pass design (statistics, then normalise" in said["text"], said
    assert "fuse it" in said["text"] and "too few programs" in said["text"]


def test_at_the_ceiling_it_says_so_and_far_below_it_names_no_design():
    assert speed_diagnosis(shape(0.97))["text"].startswith("at the copy ceiling: about the "
                                                           "least this shape must move, 8 B")
    slow = speed_diagnosis(shape(0.25))
    assert slow["traversals"] == 8.0
    assert "is the least: more than any design of the traffic table moves." in slow["text"]


def test_half_precision_and_a_causal_mask_count_their_own_bytes():
    bf16 = speed_diagnosis(shape(0.5, dtype="bfloat16"))
    assert bf16["least_bytes_per_element"] == 4.0 and bf16["traversals"] == 4.0
    # a causal mask need not read x above the diagonal: the least is under one traversal
    n = 4096 * 4096
    causal = speed_diagnosis(shape(0.95, least=int(4 * n * 1.5)))
    assert causal["least_traversals"] == 1.5 and "6 B an element" in causal["text"]
    assert speed_diagnosis(shape(0.5, dtype="int8")) == {}  # no words for what we can't size


def test_the_report_says_it_under_the_table_and_the_score_is_untouched():
    perf = {"points": 50.0, "max_points": 100.0, "fraction_of_copy": 0.5,
            "shapes": [{**shape(0.5).to_json(), "diagnosis": speed_diagnosis(shape(0.5))}]}
    result = GradeResult(exercise="safe_softmax", language="triton", device="cuda",
                         verdict=Verdict.PASSED, score=150.0, performance=perf)
    text = render(result)
    assert "what the times say (never part of the score):" in text
    assert "4096×4096 float32: ran in the time of 16 B an element" in text


H200 = {"sms": 132, "regs_per_sm": 65536, "threads_per_sm": 2048, "shared_per_sm": 233472,
        "major": 9, "minor": 0}  # as torch reports it on the H200


def kernel(name="softmax_kernel", grid=(4096, 1, 1), warps=4, regs=32, spills=0, shared=0):
    return {"name": name, "grid": list(grid), "launches": 1, "num_warps": warps,
            "num_stages": 3, "registers": regs, "spill_bytes": spills, "shared_bytes": shared}


def test_programs_an_sm_follow_the_occupancy_rules_and_name_their_limit():
    said = kernel_words([kernel(regs=32, warps=4)], H200, at_ceiling=True)
    k = said["kernels"][0]
    assert (k["programs_per_sm"], k["occupancy"]) == (16, 1.0)  # 16 × 128 threads = 2048
    assert said["warnings"] == []
    # 255 registers at 8 warps: 32 units of 256 a warp × 8 warps = all 65536 registers
    k = kernel_words([kernel(regs=255, warps=8)], H200, at_ceiling=True)["kernels"][0]
    assert (k["programs_per_sm"], k["limited_by"]) == (1, "registers")
    assert "1 an SM (registers the limit), occupancy 12 %" in k["text"]
    # 100 KiB of shared memory: two programs (each keeps 1 KiB more)
    k = kernel_words([kernel(regs=32, shared=100 << 10)], H200, at_ceiling=True)["kernels"][0]
    assert (k["programs_per_sm"], k["limited_by"]) == (2, "shared memory")
    assert ", 100.0 KiB shared; 2 an SM (shared memory the limit)" in k["text"]
    assert ", 16 B shared; " in kernel_words([kernel(shared=16)], H200, True)["kernels"][0]["text"]
    # CUDA's partitions: 40 registers at 2 warps fit 24 programs (12 warps a partition,
    # 48 in all), not 65536 // (1280 × 2) = 25
    k = kernel_words([kernel(regs=40, warps=2)], H200, at_ceiling=True)["kernels"][0]
    assert (k["programs_per_sm"], k["limited_by"], k["occupancy"]) == (24, "registers", 0.75)
    # shared memory in units of 128 B, with 1 KiB kept a block from compute capability 8.0
    k = kernel_words([kernel(warps=1, regs=16, shared=8000)], H200, True)["kernels"][0]
    assert k["programs_per_sm"] == 233472 // 9088  # (8000 + 1024) rounded up to 128 B: 25
    turing = {**H200, "major": 7, "minor": 5, "shared_per_sm": 65536, "threads_per_sm": 1024}
    k = kernel_words([kernel(warps=1, regs=16, shared=8000)], turing, True)["kernels"][0]
    assert k["programs_per_sm"] == 65536 // 8064  # 8000 rounded up to 128 B, nothing kept: 8
    # one warp of few registers: the SM's cap of 32 programs
    k = kernel_words([kernel(regs=16, warps=1)], H200, at_ceiling=True)["kernels"][0]
    assert (k["programs_per_sm"], k["limited_by"]) == (32, "the SM's cap on programs")


def test_below_the_ceiling_each_limit_gets_its_warning_and_fix():
    spilling = kernel_words([kernel(regs=255, warps=1, spills=412)], H200, at_ceiling=False)
    assert any("spills 412 B a thread" in w and "more warps (num_warps)" in w
               for w in spilling["warnings"])
    one = kernel_words([kernel(regs=255, warps=8)], H200, at_ceiling=False)["warnings"]
    assert len(one) == 1 and "its registers leave room for one program an SM" in one[0]
    assert "Fewer registers a program (fewer values held a thread" in one[0]
    # one program an SM by its shared memory: the fix is about shared memory, not registers
    (big,) = kernel_words([kernel(shared=150 << 10)], H200, at_ceiling=False)["warnings"]
    assert "its shared memory leaves room for one" in big and "Less shared memory a program (fewer num_stages" in big
    few = kernel_words([kernel(grid=(64, 1, 1), regs=40)], H200, at_ceiling=False)["warnings"]
    assert few == ["`softmax_kernel` ran 64 programs for 132 SMs: 68 SMs had nothing to do. "
                   "Split each program's work over several programs and combine their partial "
                   "results"]
    # a small helper of one program a row beside a wide kernel is no fault: only the call's
    # largest grid is judged (split rows, then a merge of 64 rows' partials)
    helper = kernel_words([kernel("chunk_stats", grid=(64, 128, 1)), kernel("merge", (64, 1, 1))],
                          H200, at_ceiling=False)
    assert helper["warnings"] == []
    # 256 programs where 8 an SM × 132 SMs = 1056 fit: most places empty (measured on the
    # H200: tests/fixtures/speed/row_per_program.py at 256×262144, 0.45 of copy)
    (half,) = kernel_words([kernel(grid=(256, 1, 1), warps=8)], H200, False)["warnings"]
    assert half.startswith("`softmax_kernel` ran 256 programs where the GPU holds 1056 at once "
                           "(8 an SM on 132 SMs): most places stayed empty")
    assert kernel_words([kernel(grid=(528, 1, 1), warps=8)], H200, False)["warnings"] == []
    # one program of 128 threads a 256-column row: 2 elements a thread (measured on the H200:
    # tests/fixtures/speed/spilling.py at 65536×256, 0.75 of copy; the HIP reference's one
    # block of 256 threads a row, 0.15)
    (thin,) = kernel_words([kernel(grid=(65536, 1, 1))], H200, False,
                           elements=65536 * 256)["warnings"]
    assert thin.startswith("`softmax_kernel` spread 16777216 elements over 65536 programs of "
                           "128 threads, 2 elements a thread")
    assert "several rows a program" in thin
    (one,) = kernel_words([kernel(grid=(65536, 1, 1), warps=8)], H200, False,
                          elements=65536 * 256)["warnings"]
    assert "of 256 threads, 1 element a thread:" in one
    # 4 a thread is enough; and no shape size, no such warning
    assert kernel_words([kernel(grid=(32768, 1, 1))], H200, False,
                        elements=32768 * 512)["warnings"] == []
    assert kernel_words([kernel(grid=(65536, 1, 1))], H200, False)["warnings"] == []
    # at the ceiling the same facts are listed, without warnings
    assert kernel_words([kernel(grid=(64, 1, 1))], H200, at_ceiling=True)["warnings"] == []


def test_what_the_runner_says_is_bounded_never_believed():
    junk = [kernel(regs=9999), kernel(grid=(0, 1, 1)), {"name": 3}, "x", kernel(warps=True),
            kernel(name="<script>alert(1)</script>k")]
    said = kernel_words(junk * 10, H200, at_ceiling=False)
    # only the first 16 entries are looked at: two good ones among them
    assert [k["name"] for k in said["kernels"]] == ["scriptalert1scriptk"] * 2
    assert kernel_words([kernel()], {**H200, "sms": -1}, at_ceiling=False) == {}
    assert kernel_words("many", H200, at_ceiling=False) == {}
    assert kernel_words([kernel()], None, at_ceiling=False) == {}  # the CPU, HIP, old runners


def test_the_runner_groups_a_calls_launches_by_kernel_and_grid():
    kernel_facts._compiled[7] = {"name": "row_max", "num_warps": 4, "num_stages": 3,
                                 "registers": 40, "spill_bytes": 0, "shared_bytes": 16}
    with kernel_facts.watching() as seen:
        for _ in range(3):
            kernel_facts.note_launch(7, (4096, 1, 1))
        kernel_facts.note_launch(8, (1, 1, 1))  # a handle loaded before the hook: no facts
    kernel_facts.note_launch(7, (4096, 1, 1))  # after the call: not counted
    with kernel_facts.watching(enabled=False) as unwatched:
        kernel_facts.note_launch(7, (4096, 1, 1))
    assert seen == [{"name": "row_max", "num_warps": 4, "num_stages": 3, "registers": 40,
                     "spill_bytes": 0, "shared_bytes": 16, "grid": [4096, 1, 1], "launches": 3},
                    {"name": "", "grid": [1, 1, 1], "launches": 1}]
    assert unwatched == []
    assert [k["launches"] for k in kernel_words(seen, H200, True)["kernels"]] == [3]


def test_the_report_lists_the_compiled_kernels_and_the_warnings():
    said = {**speed_diagnosis(shape(0.3, rows=64, cols=1 << 20)),
            **kernel_words([kernel(grid=(64, 1, 1))], H200, at_ceiling=False)}
    perf = {"points": 30.0, "max_points": 100.0, "fraction_of_copy": 0.3,
            "shapes": [{**shape(0.3, rows=64, cols=1 << 20).to_json(), "diagnosis": said}]}
    text = render(GradeResult(exercise="online_softmax", language="triton", device="cuda",
                              verdict=Verdict.PASSED, score=130.0, performance=perf))
    assert ("      compiled: softmax_kernel: 64 programs of 4 warps, 3 stages, 32 registers a "
            "thread, no spills; 16 an SM (threads the limit), occupancy 100 %") in text
    assert "      warning: `softmax_kernel` ran 64 programs for 132 SMs" in text


def test_the_result_page_shows_each_shapes_words(tmp_path):
    from test_server_api import ADMIN, _graded, add_students, running
    from test_web_pages import GPU_RESULT, sign_in

    said = {**speed_diagnosis(shape(0.5)),
            **kernel_words([kernel(regs=255, warps=1, spills=412)], H200, at_ceiling=False)}
    result = {**GPU_RESULT, "performance": {**GPU_RESULT["performance"], "shapes": [
        {**GPU_RESULT["performance"]["shapes"][0], "fraction": 0.5, "diagnosis": said},
        GPU_RESULT["performance"]["shapes"][1]]}}  # an older result: no words, none shown
    with running(f"sqlite:///{tmp_path / 'db'}") as client:
        tokens = add_students(client, "ada")
        with client.app.state.sessionmaker.begin() as db:
            sid = _graded(db, "ada", 100.0, result=result)
        sign_in(client, tokens["ada"])
        page = client.get(f"/submissions/{sid}").text
        assert 'id="speed-said"' in page and "<strong>4096×4096 float32</strong>: ran in" in page
        assert "65536×256 bfloat16</strong>:" not in page
        assert ("<code>softmax_kernel: 4096 programs of 1 warp, 3 stages, 255 registers a thread, "
                "412 B ") in page
        assert ('<p class="warn" role="note"><strong>Warning:</strong> <code>softmax_kernel</code> '
                'spills 412 B') in page
        sign_in(client, ADMIN)


def test_a_hip_kernel_is_described_from_the_drivers_attributes():
    """HIP submissions launch through graders.hip.launch: the facts come from CuPy's view of
    the loaded function, one block of ``block`` threads a row; a fact CuPy cannot give
    leaves the entry out rather than guessing it."""
    from types import SimpleNamespace

    from graders.hip.launch import compiled_facts

    loaded = SimpleNamespace(num_regs=40, local_size_bytes=0, shared_size_bytes=2048)
    facts = compiled_facts(loaded, "softmax_rows", 256)
    assert facts == {"name": "softmax_rows", "num_warps": 8, "num_stages": None,
                     "registers": 40, "spill_bytes": 0, "shared_bytes": 2048}
    with kernel_facts.watching() as seen:
        kernel_facts.note_launch(("hip", "softmax_rows"), (4096, 1, 1), facts)
    (k,) = kernel_words(seen, H200, at_ceiling=True)["kernels"]
    assert k["text"] == ("softmax_rows: 4096 programs of 8 warps, 40 registers a thread, no "
                         "spills, 2.0 KiB shared; 6 an SM (registers the limit), occupancy 75 %")

    class Unloaded:  # an attribute CuPy cannot read
        @property
        def num_regs(self):
            raise RuntimeError("no context")

    partial = compiled_facts(Unloaded(), "softmax_rows", 256)
    assert partial["registers"] is None and partial["spill_bytes"] is None
    with kernel_facts.watching() as seen:
        kernel_facts.note_launch(("hip", "other"), (4096, 1, 1), partial)
    assert kernel_words(seen, H200, at_ceiling=True) == {}
