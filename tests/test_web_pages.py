"""The pages without a browser: redirects, privacy, and the GPU chart of a result."""

import json
import re

from conftest import REPO
from server.auth.sessions import COOKIE
from test_server_api import ADMIN, _graded, add_students, running

GPU_RESULT = {
    "exercise": "safe_softmax", "language": "triton", "device": "cuda",
    "device_name": "NVIDIA H200", "verdict": "passed", "score": 100.0, "checks": [],
    "grader_version": "test", "message": "",
    "performance": {"fraction_of_copy": 0.93, "gbs": 3500.0, "shapes": [
        {"rows": 4096, "cols": 4096, "dtype": "float32", "ms": 0.04, "gbs": 3600.0,
         "copy_gbs": 3800.0, "fraction": 0.947, "spread": 0.01},
        {"rows": 65536, "cols": 256, "dtype": "bfloat16", "ms": 0.02, "gbs": 2900.0,
         "copy_gbs": 3100.0, "fraction": 0.935, "spread": 0.02}]},
}


def test_pages_need_a_session_and_keep_submissions_private(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db'}") as client:
        tokens = add_students(client, "ada", "eve")
        r = client.get("/me", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/signin?next=%2Fme"
        assert client.get("/exercises").status_code == 200  # public
        assert client.get("/leaderboard/safe_softmax").status_code == 200  # public

        with client.app.state.sessionmaker.begin() as db:
            sid = _graded(db, "ada", 100.0, result=GPU_RESULT, source="secret source")

        sign_in(client, tokens["eve"])
        other = client.get(f"/submissions/{sid}")
        assert other.status_code == 404 and "secret source" not in other.text
        assert "<h1>Not found</h1>" in other.text  # a page, not JSON
        assert client.get("/admin").status_code == 403

        sign_in(client, tokens["ada"])
        page = client.get(f"/submissions/{sid}")
        assert page.status_code == 200
        assert "<svg" in page.text and "3600.0 GB/s · 95% of copy" in page.text
        assert "65536×256 bfloat16" in page.text
        board = client.get("/leaderboard/safe_softmax").text
        assert "93%" in board and "NVIDIA H200" in board

        sign_in(client, ADMIN)
        assert "secret source" in client.get(f"/admin/source/{sid}").text


def test_signing_in_sets_an_httponly_cookie(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db'}") as client:
        token = add_students(client, "ada")["ada"]
        form = form_token(client, "/signin")
        r = client.post("/signin", data={"token": token, "csrf": form}, follow_redirects=False)
        assert r.status_code == 303
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie
        # the page's token was made for no session: signed in, the form is reloaded
        assert client.post("/signin", data={"token": "nope", "csrf": form}).status_code == 403
        form = form_token(client, "/signin")
        assert client.post("/signin", data={"token": "nope", "csrf": form}).status_code == 401


def form_token(client, path: str) -> str:
    """The CSRF token a page's forms carry (server/auth/csrf.py)."""
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', client.get(path).text)
    assert match, f"no CSRF token on {path}"
    return match.group(1)


def sign_in(client, token: str) -> None:
    """Through the sign-in form, as a browser does (the cookie holds a session)."""
    r = client.post("/signin", data={"token": token, "csrf": form_token(client, "/signin")},
                    follow_redirects=False)
    assert r.status_code == 303, r.text[:300]


def test_signing_out_ends_the_session_and_the_api_token_stays(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db'}") as client:
        token = add_students(client, "ada")["ada"]
        sign_in(client, token)
        session = client.cookies.get(COOKIE)
        assert session and session != token  # the cookie never holds the API token
        assert client.get("/me", follow_redirects=False).status_code == 200
        r = client.post("/signout", data={"csrf": form_token(client, "/me")},
                        follow_redirects=False)
        assert r.status_code == 303
        client.cookies.set(COOKIE, session)  # the old cookie, replayed
        assert client.get("/me", follow_redirects=False).status_code == 303  # to /signin
        assert client.get("/api/submissions", headers={"Authorization": f"Bearer {token}"}
                          ).status_code == 200


def test_an_uploaded_hip_file_is_hip_whatever_the_picker_says(tmp_path):
    """Issue 14: a .hip upload with the picker left on Triton was graded as Triton."""
    from test_server_api import NoDispatch

    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch()) as client:
        token = add_students(client, "ada")["ada"]
        sign_in(client, token)
        form = form_token(client, "/exercises/safe_softmax")
        hip = (REPO / "reference_solutions" / "safe_softmax" / "solution.hip").read_bytes()
        r = client.post("/exercises/safe_softmax/submit", follow_redirects=False,
                        data={"language": "triton", "csrf": form},
                        files={"file": ("mine.hip", hip, "application/octet-stream")})
        assert r.status_code == 303, r.text[:300]
        sid = int(r.headers["location"].rsplit("/", 1)[1])
        mine = client.get(f"/api/submissions/{sid}").json()
        assert mine["language"] == "hip" and mine["filename"] == "mine.hip"


def test_a_student_sees_that_a_flagged_submission_does_not_count(tmp_path):
    """Issue 14, item 6: the student's page said 100/100 with a small grey "flagged" while
    the leaderboard showed a lower score."""
    from server.domain.models import Flag

    with running(f"sqlite:///{tmp_path / 'db'}") as client:
        token = add_students(client, "ada")["ada"]
        with client.app.state.sessionmaker.begin() as db:
            sid = _graded(db, "ada", 100.0, result=GPU_RESULT, flag=Flag.SUSPICIOUS)
        sign_in(client, token)
        page = client.get(f"/submissions/{sid}").text
        assert "Flagged suspicious by an instructor" in page
        assert "does not count on the leaderboard or in grades" in page
        assert "flagged suspicious: does not count" in client.get("/me").text


def test_times_read_as_times_and_a_past_deadline_says_it_passed(tmp_path):
    """Issue 14, item 10: raw ISO strings, and a past deadline that looked like a future one."""
    deadlines = {"safe_softmax": "2026-01-05T12:00:00+00:00",
                 "masked_softmax": "2999-01-05T12:00:00+00:00"}
    with running(f"sqlite:///{tmp_path / 'db'}", deadlines=deadlines) as client:
        past = client.get("/exercises/safe_softmax").text
        future = client.get("/exercises/masked_softmax").text
        assert '<time datetime="2026-01-05T12:00:00+00:00">2026-01-05 12:00:00 UTC</time>' in past
        assert re.search(r"\(passed \d+ days? ago\)", past)
        assert "(in " in future and "passed" not in future.split("Deadline:")[1][:200]
        listing = client.get("/exercises").text
        assert "passed" in listing and "(in " in listing


def test_a_failed_result_opens_with_a_summary_line(tmp_path):
    """Issue 14, item 10: "2 of 8 checks failed: poisoned_row, underflow" at the top."""
    failed = dict(GPU_RESULT, verdict="failed", score=70.0, performance=None,
                  message="2 of 8 checks failed: poisoned_row, underflow")
    with running(f"sqlite:///{tmp_path / 'db'}") as client:
        token = add_students(client, "ada")["ada"]
        with client.app.state.sessionmaker.begin() as db:
            sid = _graded(db, "ada", 70.0, result=failed)
        sign_in(client, token)
        page = client.get(f"/submissions/{sid}").text
        assert '<p class="summary">2 of 8 checks failed: poisoned_row, underflow</p>' in page


def test_submitting_while_one_is_in_flight_keeps_the_file_and_links_the_first(tmp_path):
    """Issue 14, item 8: "wait for it" with no link, the chosen file dropped, and the browser
    left on /submit."""
    from test_server_api import NoDispatch
    from server.auth.csrf import FIELD

    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch()) as client:
        token = add_students(client, "ada")["ada"]
        sign_in(client, token)
        page = client.get("/exercises/safe_softmax").text
        csrf = re.search(rf'name="{FIELD}" value="([^"]+)"', page).group(1)
        action = re.search(r'<form method="post" action="(/exercises/safe_softmax)(?:#[\w-]+)?"',
                           page)
        assert action, "the form posts to the page's own address"
        first = client.post(action.group(1), data={FIELD: csrf, "language": "triton"},
                            files={"file": ("mine.py", b"def softmax(x):\n    return x  # 1\n")},
                            follow_redirects=False)
        assert first.status_code == 303
        first_id = first.headers["location"].rsplit("/", 1)[1]
        second = client.post(action.group(1), data={FIELD: csrf, "language": "triton"},
                             files={"file": ("mine.py", b"def softmax(x):\n    return x  # 2\n")})
        assert second.status_code == 429
        assert ("You already have a submission being graded: wait for it to finish "
                f'(<a href="/submissions/{first_id}">see submission {first_id}</a>).') in second.text
        assert "return x  # 2" in second.text  # the file is in the editor, not lost


def test_the_instructor_pages_confirm_report_and_name(tmp_path):
    """Issue 14, item 9: "regrade all" asked nothing and said nothing; the list had no time
    or late column; a submission's page did not name its student."""
    from server.auth.csrf import FIELD

    with running(f"sqlite:///{tmp_path / 'db'}") as client:
        token = add_students(client, "ada")["ada"]
        sign_in(client, token)
        from test_server_api import wait_done

        sid = client.post("/api/submissions", headers={"Authorization": f"Bearer {token}"},
                          json={"exercise": "safe_softmax", "language": "triton",
                                "source": "# fake: passed 100\n"}).json()["id"]
        wait_done(client, token, sid)
        sign_in(client, ADMIN)
        page = client.get("/admin").text
        csrf = re.search(rf'name="{FIELD}" value="([^"]+)"', page).group(1)
        assert '<option value="">choose…</option>' in page  # nothing preselected
        # the list's Submitted column, newest first (a link sorts by it: issue 42)
        assert re.search(r'<th scope="col" aria-sort="descending"><a class="sort" '
                         r'href="[^"]*">Submitted', page) and "<time datetime=" in page
        unconfirmed = client.post("/admin/regrade", data={FIELD: csrf, "exercise": "safe_softmax"})
        assert unconfirmed.status_code == 422 and "tick the box" in unconfirmed.text
        done = client.post("/admin/regrade", data={FIELD: csrf, "exercise": "safe_softmax",
                                                   "confirm": "yes"})
        assert done.status_code == 200
        assert "Regrade of all of safe_softmax: 1 queued" in done.text, \
            (done.url, re.findall(r'role="(?:status|alert)"[^>]*>([^<]*)', done.text))
        sid = re.search(r'<tr data-id="(\d+)"', done.text).group(1)
        flagged = client.post("/admin/flag", data={FIELD: csrf, "submission_id": sid,
                                                   "flag": "suspicious"})
        assert f"Submission {sid} is now flagged suspicious." in flagged.text
        assert "by <strong>Ada</strong> (ada)" in client.get(f"/submissions/{sid}").text
        # the notice is chosen by the query string, never written by it
        forged = client.get("/admin?done=regraded&what=<script>x</script>&n=abc").text
        assert "<script>x</script>" not in forged


def test_signing_in_returns_to_the_page_it_came_from(tmp_path):
    """Issue 14, item 10: sign-in always went to /exercises. It returns to the page that
    asked, and only ever to a page of this app."""
    from server.auth.csrf import FIELD

    with running(f"sqlite:///{tmp_path / 'db'}") as client:
        token = add_students(client, "ada")["ada"]
        asked = client.get("/me", follow_redirects=False).headers["location"]
        page = client.get(asked).text
        assert '<input type="hidden" name="next" value="/me">' in page
        csrf = re.search(rf'name="{FIELD}" value="([^"]+)"', page).group(1)
        back = client.post("/signin", data={FIELD: csrf, "token": token, "next": "/me"},
                           follow_redirects=False)
        assert back.headers["location"] == "/me"
        for elsewhere in ("https://evil.example/x", "//evil.example/x", "/\\evil.example"):
            csrf = form_token(client, "/signin")  # each sign-in a new session, a new token
            r = client.post("/signin", data={FIELD: csrf, "token": token, "next": elsewhere},
                            follow_redirects=False)
            assert r.headers["location"] == "/exercises", elsewhere


def test_a_student_reads_downloads_and_compares_their_own_attempts(tmp_path):
    """Issue 14: their own source and result JSON, to read and download, and the changes
    between two attempts; never anyone else's."""
    from test_server_api import wait_done

    with running(f"sqlite:///{tmp_path / 'db'}") as client:
        tokens = add_students(client, "ada", "eve")
        headers = {"Authorization": f"Bearer {tokens['ada']}"}
        ids = []
        for score in (40, 100):
            sid = client.post("/api/submissions", headers=headers, json={
                "exercise": "safe_softmax", "language": "triton", "filename": "mine.py",
                "source": f"# fake: passed {score}\nx = {score}\n"}).json()["id"]
            wait_done(client, tokens["ada"], sid)
            ids.append(sid)
        sign_in(client, tokens["ada"])
        assert f'<a href="/submissions/{ids[0]}/source">source</a>' in \
            client.get(f"/submissions/{ids[0]}").text
        assert "x = 40" in client.get(f"/submissions/{ids[0]}/source").text
        source = client.get(f"/submissions/{ids[0]}/download/source")
        assert source.text == "# fake: passed 40\nx = 40\n"
        assert f'filename="{ids[0]}-mine.py"' in source.headers["content-disposition"]
        result = client.get(f"/submissions/{ids[1]}/download/result")
        assert json.loads(result.text)["score"] == 100
        assert "/me/diff" in client.get("/me").text
        diff = client.get(f"/me/diff?a={ids[1]}&b={ids[0]}").text
        assert '<span class="del">-x = 40</span>' in diff
        assert '<span class="add">+x = 100</span>' in diff
        sign_in(client, tokens["eve"])
        for path in (f"/submissions/{ids[0]}/source", f"/submissions/{ids[0]}/download/source",
                     f"/submissions/{ids[0]}/download/result", f"/me/diff?a={ids[0]}&b={ids[1]}"):
            page = client.get(path)
            assert page.status_code == 404 and "x = 40" not in page.text, path


def test_each_exercise_page_says_how_to_test_it_yourself(tmp_path):
    """Issue 15, item 4: the exact grade command for this exercise and its downloaded
    skeleton, and the student-CI workflow one link away."""
    with running(f"sqlite:///{tmp_path / 'db'}") as client:
        page = client.get("/exercises/masked_softmax").text
        box = page.split('<h2 id="try-h">Test it yourself</h2>')[1].split("</section>")[0]
        assert ("python -m graders grade masked_softmax masked_softmax_skeleton.py "
                "--format text") in box
        assert "safe_softmax" not in box  # this exercise's command, not another's
        download = client.get("/exercises/masked_softmax/skeleton/triton")
        assert 'filename="masked_softmax_skeleton.py"' in download.headers["content-disposition"]
        assert 'href="/help/student-ci"' in box
        doc = client.get("/help/student-ci")
        assert doc.status_code == 200
        assert "--format github" in doc.text and "actions/checkout" in doc.text
