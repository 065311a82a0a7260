"""The similarity report (issue 30): a renamed-variable copy is flagged and two independent
solutions are not; a run is computed in a process of its own and stored; the instructor
reads the pairs most similar first, opens one side by side and flags both from there; a
student reaches none of it. The browser view, at a laptop's and a phone's width:
tests/test_pages_phone.py."""

from __future__ import annotations

import re
import time

from conftest import REPO
from server.domain.models import Flag, Status, Submission
from server.similarity.run import FLOOR, Source, compare
from test_server_api import ADMIN, NoDispatch, add_students, auth, running, submit
from test_web_pages import form_token, sign_in

SCRATCH = REPO / "reference_solutions" / "safe_softmax" / "from_scratch"
SKELETON = (REPO / "exercises" / "safe_softmax" / "skeleton.py").read_text()


def renamed(source: str) -> str:
    """The copy a student makes to hide it: every name of the kernel changed."""
    for old, new in [("x_ptr", "inp"), ("y_ptr", "outp"), ("n_cols", "width"),
                     ("n_rows", "height"), ("row", "r_i"), ("BLOCK_SIZE", "TILE_W")]:
        source = re.sub(rf"\b{old}\b", new, source)
    return source


ORIGINAL = (SCRATCH / "row_per_program.py").read_text()
COPY = renamed(ORIGINAL)
# two designs of the course's own, written apart: a tiled two-pass kernel and one whose
# online (m, s) pairs are reduced with tl.reduce
INDEPENDENT = [(SCRATCH / "block_ptr_tiles.py").read_text(),
               (SCRATCH / "reduce_online_pairs.py").read_text()]


def test_a_renamed_copy_is_flagged_and_independent_solutions_are_not():
    assert COPY != ORIGINAL and "TILE_W" in COPY
    sources = [Source(1, "ada", "triton", ORIGINAL), Source(2, "bob", "triton", COPY),
               Source(3, "cy", "triton", INDEPENDENT[0]),
               Source(4, "dee", "triton", INDEPENDENT[1])]
    pairs = compare(sources, {"triton": SKELETON})
    top = pairs[0]
    assert (top["a"], top["b"]) == (1, 2) and top["similarity"] >= 0.9, pairs[:3]
    assert top["a_spans"] and top["b_spans"]  # where the match is, in each file
    # every mark starts and ends between words (copydetect's own offsets cut "re|turn"; where
    # exactly depends on Python's hash seed, as copydetect fingerprints with hash())
    def word(char):
        return char.isalnum() or char == "_"

    for text, spans in ((ORIGINAL, top["a_spans"]), (COPY, top["b_spans"])):
        for start, end in spans:
            for i in (start, end):
                assert not (0 < i < len(text) and word(text[i - 1]) and word(text[i])), (
                    text[max(0, i - 10):i], text[i:i + 10])
    scores = {(p["a"], p["b"]): p["similarity"] for p in pairs}
    assert scores.get((3, 4), 0.0) < 0.9, scores
    assert all(p["similarity"] >= FLOOR for p in pairs)


def test_the_skeleton_is_left_out_and_a_student_is_never_paired_with_themselves():
    sources = [Source(1, "ada", "triton", SKELETON), Source(2, "bob", "triton", SKELETON),
               Source(3, "ada", "triton", COPY), Source(4, "ada", "triton", ORIGINAL)]
    assert compare(sources, {"triton": SKELETON}) == []
    # without the skeleton as boilerplate, two untouched skeletons are the same file
    assert compare(sources[:2], {})[0]["similarity"] == 1.0


def _wait_report(client, exercise="safe_softmax", timeout=120.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/api/admin/similarity/{exercise}", headers=auth(ADMIN)).json()
        if body["status"] != "running":
            return body
        time.sleep(0.3)
    raise AssertionError(f"the similarity run is still running: {body}")


def test_the_instructor_computes_reads_compares_and_flags(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch()) as client:
        tokens = add_students(client, "ada", "bob", "cy", "dee")
        ids = {}
        for name, source in [("ada", ORIGINAL), ("bob", COPY), ("cy", INDEPENDENT[0]),
                             ("dee", INDEPENDENT[1])]:
            r = submit(client, tokens[name], source)
            assert r.status_code == 202, r.text
            ids[name] = r.json()["id"]
        assert client.get("/api/admin/similarity/safe_softmax",
                          headers=auth(ADMIN)).status_code == 404  # none yet
        assert client.post("/api/admin/similarity/safe_softmax",
                           headers=auth(tokens["ada"])).status_code == 403

        started = client.post("/api/admin/similarity/safe_softmax", headers=auth(ADMIN))
        assert started.status_code == 202 and started.json()["status"] == "running"
        again = client.post("/api/admin/similarity/safe_softmax", headers=auth(ADMIN))
        assert again.json()["id"] == started.json()["id"]  # the run still going, not a second
        report = _wait_report(client)
        assert report["status"] == "done" and report["submissions"] == 4, report
        top = report["pairs"][0]
        assert {top["a"], top["b"]} == {ids["ada"], ids["bob"]} and top["similarity"] >= 0.9
        assert not any({p["a"], p["b"]} == {ids["cy"], ids["dee"]} and p["similarity"] >= 0.9
                       for p in report["pairs"])
        # computed again over the same files: the same pairs and the same marks (copydetect
        # hashes with Python's hash(): the run's process has a fixed seed)
        second = client.post("/api/admin/similarity/safe_softmax", headers=auth(ADMIN))
        assert second.json()["id"] != started.json()["id"]
        assert _wait_report(client)["pairs"] == report["pairs"]

        sign_in(client, tokens["ada"])
        assert client.get("/admin/similarity/safe_softmax").status_code == 403
        sign_in(client, ADMIN)
        page = client.get("/admin/similarity/safe_softmax").text
        assert page.index(f'data-a="{top["a"]}" data-b="{top["b"]}"') < page.index("</tbody>")
        pair_url = f"/admin/similarity/safe_softmax/pair/{top['a']}/{top['b']}"
        assert pair_url in page and "similar</strong>" in page
        view = client.get(pair_url)
        assert view.status_code == 200 and view.text.count("<mark>") >= 2
        assert "&lt;" not in COPY or "&lt;" in view.text  # the sources are escaped
        r = client.post("/admin/similarity/safe_softmax/flag",
                        data={"a": top["a"], "b": top["b"], "csrf": form_token(client, pair_url)},
                        follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].endswith("?done=flagged")
        with client.app.state.sessionmaker() as db:
            flags = {db.get(Submission, i).flag for i in (top["a"], top["b"])}
            others = {db.get(Submission, i).flag for i in (ids["cy"], ids["dee"])}
        assert flags == {Flag.SUSPICIOUS} and others == {Flag.NONE}
        assert "now flagged suspicious" in client.get(f"{pair_url}?done=flagged").text
        assert client.get("/admin/similarity/safe_softmax/pair/1/999").status_code == 404


def test_hip_files_are_compared_as_cpp_and_only_with_hip():
    reference = (REPO / "reference_solutions" / "safe_softmax" / "solution.hip").read_text()
    skeleton = (REPO / "exercises" / "safe_softmax" / "skeleton.hip").read_text()
    copy = re.sub(r"\brow\b", "r_i", reference)
    assert copy != reference
    pairs = compare([Source(1, "ada", "hip", reference), Source(2, "bob", "hip", copy),
                     Source(3, "cy", "hip", skeleton), Source(4, "dee", "triton", ORIGINAL)],
                    {"hip": skeleton, "triton": SKELETON})
    assert [(p["a"], p["b"], p["language"]) for p in pairs] == [(1, 2, "hip")]
    assert pairs[0]["similarity"] >= 0.9


def test_a_students_best_file_is_compared_as_well_as_their_latest(database_url):
    """A copy of ada's best submission is found after ada hands in something else: each
    student brings their best (highest score) and their latest file, and a pair of students
    is as similar as their two closest files (SQLite and PostgreSQL choose the same)."""
    from server.similarity.run import candidate_sources

    with running(database_url, dispatcher=NoDispatch()) as client:
        tokens = add_students(client, "ada", "bob", "cy")

        def graded(name, source, score):  # one in flight at a time: grade it by hand
            sid = submit(client, tokens[name], source).json()["id"]
            with client.app.state.sessionmaker.begin() as db:
                row = db.get(Submission, sid)
                row.status, row.score = Status.GRADED, score
            return sid

        best = graded("ada", ORIGINAL, 100.0)
        later = graded("ada", INDEPENDENT[0], 40.0)
        copy = graded("bob", COPY, None)  # not graded yet: still its latest
        graded("cy", INDEPENDENT[1], 90.0)
        cy_high = graded("cy", INDEPENDENT[1] + "\n# again\n", 90.0)
        cy_last = graded("cy", SKELETON, 10.0)
        with client.app.state.sessionmaker() as db:
            sources = candidate_sources(db, "safe_softmax")
        # ada: best and latest; bob: one file, both; cy: the later of two equal bests, latest
        assert [s.submission_id for s in sources] == [best, later, copy, cy_high, cy_last]
        pairs = compare(sources, {"triton": SKELETON})
        assert (pairs[0]["a"], pairs[0]["b"], pairs[0]["a_user"]) == (best, copy, "ada")
        assert pairs[0]["similarity"] >= 0.9
        # one line per pair of students, their closest files
        assert len({(p["a_user"], p["b_user"]) for p in pairs}) == len(pairs)


def test_marks_widened_to_whole_words_are_merged_where_they_meet():
    """copydetect can split one match inside a word ("imp|ort"): widened, the two spans
    overlap, and the view must mark both whole (it once dropped the second)."""
    from server.similarity.run import _spans
    from server.web.similarity import marked

    text = "from x import y\nz = 1\n"
    # copydetect's slices: a row of starts and a row of ends
    assert _spans([[0, 8], [10, 21]], text) == [[0, 21]]  # "from x imp", "port y\nz = 1"
    assert _spans([[0, 7], [4, 9]], text) == [[0, 4], [7, 13]]  # "from", "im" -> "import"
    assert _spans([[], []], text) == []
    # a report stored before merging: overlapping spans still mark everything they cover
    html = str(marked("from x import y\nz = 1", [[0, 8], [6, 22]])).replace("</mark><mark>", "")
    assert "<mark>from x import y</mark>" in html and "<mark>z = 1</mark>" in html, html
