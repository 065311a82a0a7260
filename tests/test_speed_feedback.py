"""Feedback that teaches speed (issue 30, its first half, the part the checker words from the
figures it derives itself): each timed shape's time read as bytes per element against the
least the shape needs, in the traffic table's terms; in the JSON, the CLI report and the
result page; never part of the score. (What the runner's compiled kernels say, registers
and spills, is not here yet: it needs the H200.)"""

from __future__ import annotations

from graders.engine.performance import ShapeFigures, speed_diagnosis
from graders.engine.report import render
from graders.engine.results import GradeResult
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
    assert slow["traversals"] == 8.0 and "more than any design of the traffic table" in slow["text"]


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


def test_the_result_page_shows_each_shapes_words(tmp_path):
    from test_server_api import ADMIN, _graded, add_students, running
    from test_web_pages import GPU_RESULT, sign_in

    said = speed_diagnosis(shape(0.5))
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
        sign_in(client, ADMIN)
