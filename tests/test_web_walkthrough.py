"""What a browser walk-through of the pages found (a HIP file only compiled read as a real 0,
the verdict filter missed `compiled`, Excel's CSVs, refused forms came back blank, and the
server's own wording), one test each."""

import html
import re
from datetime import datetime, timedelta, timezone
from urllib.parse import unquote

import pytest
from conftest import REPO
from test_server_api import ADMIN, NoDispatch, _graded, add_students, auth, grades_csv, running
from test_web_pages import form_token, sign_in

from graders.shared.vocabulary import Verdict
from server.auth.csrf import FIELD
from server.domain.models import Status, Submission

PAST = {"safe_softmax": "2020-01-01T00:00:00+00:00"}

# what the graders answer for a HIP file without a GPU (graders/engine/outcome.py)
COMPILED = {"exercise": "safe_softmax", "language": "hip", "device": "cpu",
            "device_name": "no GPU: NVRTC compile only", "verdict": "compiled", "score": 0.0,
            "max_score": 100.0, "duration_s": 7.6, "grader_version": "test",
            "message": "it compiles (NVRTC, compute_90); without a GPU nothing was run, so no "
                       "check was made",
            "checks": [{"name": "random_rows", "passed": False, "message": "not run: compiled",
                        "points": 0.0, "max_points": 16.666667, "ran": False}]}
COMPILE_ERROR = {"exercise": "safe_softmax", "language": "triton", "device": "cpu",
                 "device_name": "", "verdict": "compile_error", "score": 0.0,
                 "max_score": 100.0, "duration_s": 0.04, "grader_version": "test",
                 "message": "SyntaxError: invalid syntax (line 4 of your file)",
                 "checks": [{"name": "random_rows", "passed": False, "points": 0.0,
                             "max_points": 15.0, "message": "not run: compile_error",
                             "ran": False}]}


def text_of(page: str) -> str:
    """A page's words as a reader gets them: no tags, white space as one space (a no-break
    space kept: it is one of the things looked for)."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    words = html.unescape(re.sub(r"<[^>]+>", "", page))
    return re.sub(r"[ \t\r\n]+", " ", words).strip()


def _compiled(db, username: str) -> int:
    return _graded(db, username, 0.0, result=COMPILED, language="hip", filename="k.hip")


# -- 1. a HIP file only compiled is not scored -------------------------------------------------

def test_a_compiled_hip_file_is_neither_ranked_nor_graded(database_url):
    """ada's only work is a HIP file compiled without a GPU; cy has a compiled one beside a
    real 0; bob has 40. The board ranks bob and cy; the CSV gives ada no grade, cy a 0, and
    names the compiled ones."""
    with running(database_url, dispatcher=NoDispatch()) as client:
        add_students(client, "ada", "bob", "cy")
        with client.app.state.sessionmaker.begin() as db:
            ada = _compiled(db, "ada")
            _graded(db, "bob", 40.0, result={"verdict": "failed", "score": 40.0})
            real_zero = _graded(db, "cy", 0.0, result={"verdict": "failed", "score": 0.0})
            cy = _compiled(db, "cy")  # newer, and "as good": it must not count
        board = client.get("/api/leaderboard/safe_softmax").json()["entries"]
        assert [(e["display_name"], e["score"]) for e in board] == [("Bob", 40.0), ("Cy", 0.0)]
        assert "Ada" not in client.get("/leaderboard/safe_softmax").text

        rows = {r["username"]: r for r in grades_csv(client) if r["exercise"] == "safe_softmax"}
        assert (rows["ada"]["best_score"], rows["ada"]["submission_id"]) == ("", "")
        assert rows["ada"]["not_scored"] == f"{ada}:compiled"
        assert (rows["cy"]["best_score"], rows["cy"]["submission_id"]) == ("0.0", str(real_zero))
        assert rows["cy"]["not_scored"] == f"{cy}:compiled"
        assert rows["bob"]["not_scored"] == ""

        # the API says it has no score, not 0
        listed = client.get("/api/admin/submissions?verdict=compiled", headers=auth(ADMIN))
        assert [(s["id"], s["score"]) for s in listed.json()["submissions"]] == [
            (cy, None), (ada, None)]


def test_a_compiled_result_reads_not_scored_here_with_the_reason(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch()) as client:
        token = add_students(client, "ada")["ada"]
        with client.app.state.sessionmaker.begin() as db:
            sid = _compiled(db, "ada")
        sign_in(client, token)
        page = text_of(client.get(f"/submissions/{sid}").text)
        assert "compiled, not scored here" in page
        assert "HIP is graded on a GPU, and this server graded it on the CPU" in page
        assert "0/100" not in page and "0/16.67" not in page
        assert "random_rows not run —" in page  # the check is listed, with no points
        mine = client.get("/me").text
        assert "<td>compiled</td><td>not scored here</td>" in mine  # Result, Score
        assert "compiled, not scored here: HIP is graded on a GPU" in text_of(mine)


# -- 2. the verdict filter offers every verdict -------------------------------------------------

def test_the_verdict_filter_offers_every_verdict_of_the_graders(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch()) as client:
        sign_in(client, ADMIN)
        page = client.get("/admin?verdict=compiled").text
        menu = page.split('<select id="f-verdict"')[1].split("</select>")[0]
        offered = re.findall(r"<option[^>]*>([^<]+)</option>", menu)
        assert offered == ["all", *[v.value for v in Verdict]]
        assert "<option selected>compiled</option>" in menu


# -- 3. Excel's CSVs, and times with their timezone ---------------------------------------------

ROSTER = "username,display_name\nang,Ångström\nbob,Bob K.\n"


@pytest.mark.parametrize("data, encoding", [
    (ROSTER.encode("cp1252"), "windows-1252"),  # Excel on Windows: "CSV"
    (b"\xef\xbb\xbf" + ROSTER.encode(), "utf-8"),  # Excel: "CSV UTF-8"
    (ROSTER.encode(), "utf-8"),
])
def test_a_roster_in_utf8_or_windows_1252_is_read_right(database_url, data, encoding):
    with running(database_url, dispatcher=NoDispatch()) as client:
        r = client.post("/api/admin/students", headers=auth(ADMIN),
                        files={"file": ("roster.csv", data)})
        assert r.status_code == 200, r.text
        assert r.json()["encoding"] == encoding
        assert [s["display_name"] for s in r.json()["students"]] == ["Ångström", "Bob K."]
        rows = grades_csv(client)  # with its byte-order mark, for Excel
        assert "Ångström" in {r["display_name"] for r in rows}


def test_a_roster_that_is_no_text_excel_writes_says_what_to_do(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch()) as client:
        for data in (b"username,display_name\nx,\x81\x8d\n",  # not Windows-1252 either
                     ROSTER.encode("utf-16")):  # Excel's "Unicode Text"
            r = client.post("/api/admin/students", headers=auth(ADMIN),
                            files={"file": ("roster.csv", data)})
            assert r.status_code == 422 and 'save it as "CSV UTF-8' in r.json()["detail"]
            assert "codec" not in r.json()["detail"]  # not Python's own words


def test_the_pages_roster_upload_takes_windows_1252_and_its_tokens_csv_opens_in_excel(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch()) as client:
        sign_in(client, ADMIN)
        r = client.post("/admin/roster", data={FIELD: form_token(client, "/admin")},
                        files={"file": ("roster.csv", ROSTER.encode("cp1252"))})
        assert r.status_code == 200, r.text[:500]
        assert "<td>Ångström</td>" in r.text
        assert "it was read as Windows-1252" in r.text
        href = re.search(r'href="data:text/csv;charset=utf-8,([^"]+)"', r.text).group(1)
        tokens_csv = unquote(html.unescape(href))
        assert tokens_csv.startswith("\ufeffusername,display_name,token\n")
        assert "\nang,Ångström," in tokens_csv


def test_every_time_in_the_csv_and_the_json_carries_its_timezone(database_url):
    with running(database_url, dispatcher=NoDispatch(), deadlines=PAST) as client:
        add_students(client, "ada")
        with client.app.state.sessionmaker.begin() as db:
            _graded(db, "ada", 50.0, late=True)
        row = next(r for r in grades_csv(client) if r["exercise"] == "safe_softmax")
        assert row["deadline"] == "2020-01-01T00:00:00+00:00"
        assert datetime.fromisoformat(row["submitted_at"]).utcoffset() == timedelta(0)
        assert row["submitted_at"].endswith("+00:00")
        entry = client.get("/api/leaderboard/safe_softmax").json()["entries"][0]
        assert entry["submitted_at"].endswith("+00:00")


def test_a_time_read_in_another_timezone_is_written_in_utc():
    """PostgreSQL answers in its session's timezone: the server still writes +00:00."""
    from server.domain.formatting import iso

    berlin = datetime(2026, 12, 16, 0, 59, tzinfo=timezone(timedelta(hours=1)))
    assert iso(berlin) == "2026-12-15T23:59:00+00:00"


# -- 4. a refused form keeps what was typed ------------------------------------------------------

def test_a_refused_extension_keeps_the_form_and_names_the_deadline_as_the_page_does(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch(), deadlines=PAST) as client:
        add_students(client, "ada", "bob")
        sign_in(client, ADMIN)
        form = {FIELD: form_token(client, "/admin"), "username": "bob",
                "exercise": "safe_softmax", "deadline": "2019-06-30T12:00", "note": "flu"}
        r = client.post("/admin/extensions", data=form)
        assert r.status_code == 422
        assert "later than the course deadline (2020-01-01 00:00:00 UTC)" in r.text
        assert "+00:00)" not in r.text
        assert '<option value="bob" selected>' in r.text
        extension = r.text.split('id="extensions-h"')[1].split("</form>")[0]
        assert "<option selected>safe_softmax</option>" in extension
        assert 'value="2019-06-30T12:00"' in extension and 'value="flu"' in extension


def test_refused_regrade_roster_and_flag_forms_keep_their_input(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch()) as client:
        sign_in(client, ADMIN)
        csrf = form_token(client, "/admin")
        # regrade all, the box not ticked: the exercise stays chosen
        r = client.post("/admin/regrade", data={FIELD: csrf, "exercise": "masked_softmax"})
        assert r.status_code == 422 and "tick the box" in r.text
        regrade = r.text.split('id="regrade-h"')[1].split("</form>")[0]
        assert "<option selected>masked_softmax</option>" in regrade
        # a roster with a bad line: its lines come back, to be corrected in place
        bad = "username,display_name\nada,Ada\ninstructor,Eve\n"
        r = client.post("/admin/roster", data={FIELD: csrf},
                        files={"file": ("class.csv", bad.encode())})
        assert r.status_code == 422 and "That roster was not accepted (class.csv): " in r.text
        assert f'name="text" rows="6" cols="30" spellcheck="false" autocomplete="off">{bad}</textarea>' \
            in r.text
        assert 'value="ada"' not in r.text  # nothing of it was added, nor is shown
        fixed = bad.replace("instructor,", "eve,")
        r = client.post("/admin/roster", data={FIELD: csrf, "text": fixed},
                        follow_redirects=False)
        assert r.status_code == 303  # corrected in the box and sent again
        # a flag for a submission that is gone: the page again, with its filters
        came_from = "http://testserver/admin?exercise=masked_softmax&student=&verdict=failed"
        r = client.post("/admin/flag", headers={"referer": came_from},
                        data={FIELD: csrf, "submission_id": "999", "flag": "suspicious"})
        assert r.status_code == 404 and "No submission 999: nothing was flagged." in r.text
        filters = r.text.split('class="filters"')[1].split("</form>")[0]
        assert "<option selected>masked_softmax</option>" in filters
        assert "<option selected>failed</option>" in filters


# -- 5. the server's wording ----------------------------------------------------------------------

def test_being_graded_reads_right_and_a_number_keeps_its_unit(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch()) as client:
        token = add_students(client, "ada")["ada"]
        with client.app.state.sessionmaker.begin() as db:
            sid = _graded(db, "ada", 0.0)
            s = db.get(Submission, sid)
            s.status, s.verdict, s.score = Status.RUNNING, None, None
            s.started_at = datetime.now(timezone.utc) - timedelta(seconds=1)
        sign_in(client, token)
        page = text_of(client.get(f"/submissions/{sid}").text)
        # (however long the page took to come: the number is whatever it is, with its unit)
        assert re.search(r"Being graded, 0 of \d+ checks done for \d+\u00a0s", page), page[:600]


def test_a_compile_error_says_where_it_was_graded_and_no_time_for_nothing_run(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch()) as client:
        token = add_students(client, "ada")["ada"]
        with client.app.state.sessionmaker.begin() as db:
            sid = _graded(db, "ada", 0.0, result=COMPILE_ERROR)
            hip = _compiled(db, "ada")
        sign_in(client, token)
        meta = client.get(f"/submissions/{sid}").text.split('id="verdict-h"')[1]
        meta = text_of(meta.split('<p class="meta">')[1].split("</p>")[0])
        assert meta == "graded on the CPU"  # not "cpu · 0.0 s"
        meta = client.get(f"/submissions/{hip}").text.split('id="verdict-h"')[1]
        meta = text_of(meta.split('<p class="meta">')[1].split("</p>")[0])
        assert meta == "no GPU: NVRTC compile only · 7.6\u00a0s"  # the compile took that


def test_signing_out_says_so(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch()) as client:
        token = add_students(client, "ada")["ada"]
        sign_in(client, token)
        r = client.post("/signout", data={FIELD: form_token(client, "/me")})
        assert r.status_code == 200 and "You are signed out." in r.text
        assert "You are signed out." not in client.get("/signin").text


def test_show_the_changes_compares_the_latest_two_of_one_language(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch()) as client:
        token = add_students(client, "ada")["ada"]
        with client.app.state.sessionmaker.begin() as db:
            first = _graded(db, "ada", 40.0)
            second = _graded(db, "ada", 60.0)
            _compiled(db, "ada")  # the newest, in HIP
        sign_in(client, token)
        form = client.get("/me").text.split('action="/me/diff"')[1].split("</form>")[0]
        chosen = re.findall(r'<option value="(\d+)" selected>', form)
        assert chosen == [str(first), str(second)]


def test_the_statement_links_the_benchmarks_it_cites(tmp_path):
    """The statements cited docs/benchmarks.md as plain text: it is a link, in the
    repository (to the file) and on the page (to the server's rendering of it)."""
    statement = (REPO / "exercises" / "safe_softmax" / "statement.md").read_text()
    assert "[docs/benchmarks.md](../../docs/benchmarks.md)" in statement
    assert (REPO / "exercises" / "safe_softmax" / "../../docs/benchmarks.md").resolve().is_file()
    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch()) as client:
        page = client.get("/exercises/safe_softmax").text
        assert '<a href="/help/benchmarks">docs/benchmarks.md</a>' in page
        doc = client.get("/help/benchmarks")
        assert doc.status_code == 200 and "<h1>Benchmarks</h1>" in doc.text
        assert client.get("/help/student-ci").status_code == 200
        assert client.get("/help/deploy").status_code == 404  # only the docs the pages cite
