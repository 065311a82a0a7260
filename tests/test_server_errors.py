"""Every bad input answers a 4xx with {"detail"}, never a bare 500 (issue 12, item 7)."""

import pytest

from test_server_api import ADMIN, NoDispatch, add_students, auth, running
from test_web_pages import form_token


@pytest.fixture
def client(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}") as client:
        yield client


def _is_4xx_detail(response):
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    assert "detail" in response.json()


def test_json_nested_5000_deep_is_a_4xx(client):
    token = add_students(client, "ada")["ada"]
    deep = "[" * 5000 + "]" * 5000
    for url, headers in [("/api/submissions", auth(token)), ("/api/admin/students", auth(ADMIN)),
                         ("/api/admin/regrade", auth(ADMIN))]:
        _is_4xx_detail(client.post(url, content=deep, headers={
            **headers, "Content-Type": "application/json"}))


def test_a_lone_surrogate_in_json_is_a_4xx(client):
    token = add_students(client, "ada")["ada"]
    body = '{"exercise": "safe_softmax", "language": "triton", "source": "x = \\"\\ud800\\""}'
    _is_4xx_detail(client.post("/api/submissions", content=body,
                               headers={**auth(token), "Content-Type": "application/json"}))
    roster = '{"students": [{"username": "bob\\ud800", "display_name": "B"}]}'
    _is_4xx_detail(client.post("/api/admin/students", content=roster,
                               headers={**auth(ADMIN), "Content-Type": "application/json"}))


def test_an_id_past_64_bits_is_a_4xx(client):
    token = add_students(client, "ada")["ada"]
    _is_4xx_detail(client.get("/api/submissions/99999999999999999999", headers=auth(token)))
    _is_4xx_detail(client.get("/api/admin/submissions/99999999999999999999/source",
                              headers=auth(ADMIN)))
    _is_4xx_detail(client.post("/api/admin/submissions/99999999999999999999/flag",
                               json={"flag": "suspicious"}, headers=auth(ADMIN)))
    _is_4xx_detail(client.post("/api/admin/regrade", json={"submission_id": 10**30},
                               headers=auth(ADMIN)))


@pytest.mark.parametrize("query", ["status=bogus", "flag=pwned", "verdict=bogus"])
def test_an_unknown_filter_value_is_a_4xx(client, query):
    _is_4xx_detail(client.get(f"/api/admin/submissions?{query}", headers=auth(ADMIN)))


def test_an_empty_filter_means_no_filter(client):
    r = client.get("/api/admin/submissions?flag=&status=&verdict=", headers=auth(ADMIN))
    assert r.status_code == 200 and r.json() == {"submissions": []}


def _signed_in_as_instructor(client):
    r = client.post("/signin", data={"token": ADMIN, "csrf": form_token(client, "/signin")},
                    follow_redirects=False)
    assert r.status_code in (302, 303), r.text[:300]


def test_the_instructor_forms_answer_a_4xx_for_bad_values(client):
    _signed_in_as_instructor(client)
    token = form_token(client, "/admin")
    for data in [{"submission_id": "1", "flag": "pwned"},
                 {"submission_id": "99999999999999999999", "flag": "none"}]:
        r = client.post("/admin/flag", data={**data, "csrf": token}, follow_redirects=False)
        assert 400 <= r.status_code < 500, (r.status_code, r.text[:200])
    r = client.post("/admin/regrade", data={"submission_id": "99999999999999999999",
                                            "csrf": token}, follow_redirects=False)
    assert 400 <= r.status_code < 500
    assert client.get("/submissions/99999999999999999999").status_code == 422


def test_a_form_redirects_only_to_the_apps_own_pages(client):
    _signed_in_as_instructor(client)
    token = form_token(client, "/admin")
    form = {"exercise": "safe_softmax", "confirm": "yes", "csrf": token}
    r = client.post("/admin/regrade", data=form,
                    headers={"Referer": "https://evil.example/phish"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/admin?done=regraded")
    r = client.post("/admin/regrade", data=form,
                    headers={"Referer": "http://testserver/admin?exercise=safe_softmax"},
                    follow_redirects=False)
    assert r.headers["location"].startswith("/admin?exercise=safe_softmax&done=regraded")


def test_a_nul_character_is_a_4xx_on_either_database(database_url):
    """PostgreSQL refuses a NUL in text (SQLite keeps it): each way one can arrive is a 4xx
    that says so, the same on both, and a source's NUL is named by its line."""
    with running(database_url) as client:
        token = add_students(client, "ada")["ada"]
        by_json = client.post("/api/submissions", headers=auth(token), json={
            "exercise": "safe_softmax", "language": "triton", "source": "x = 1\n\x00\n"})
        _is_4xx_detail(by_json)
        assert "NUL" in by_json.json()["detail"] and "(line 2)" in by_json.json()["detail"]
        by_file = client.post("/api/submissions", headers=auth(token),
                              data={"exercise": "safe_softmax"},
                              files={"file": ("k.py", b"x = 1\ny = 2\nz = 3\x00\n")})
        _is_4xx_detail(by_file)
        assert "NUL" in by_file.json()["detail"] and "(line 3)" in by_file.json()["detail"]
        roster = client.post("/api/admin/students", headers=auth(ADMIN), json={
            "students": [{"username": "bob", "display_name": "B\x00b"}]})
        _is_4xx_detail(roster)
        assert "NUL" in roster.json()["detail"]
        assert client.get("/api/submissions", headers=auth(token)).json()["submissions"] == []
        # a query string reaches the database as it is: PostgreSQL's refusal is answered
        # as the client's, SQLite finds nobody of that name
        listed = client.get("/api/admin/submissions?student=a%00b", headers=auth(ADMIN))
        if database_url.startswith("postgresql"):
            _is_4xx_detail(listed)
            assert "NUL" in listed.json()["detail"]
        else:
            assert listed.json() == {"submissions": []}


def test_a_roster_csv_with_a_nul_is_refused_on_the_page_on_either_database(database_url):
    with running(database_url) as client:
        _signed_in_as_instructor(client)
        csv = b"username,display_name\nbob,B\x00b\n"
        r = client.post("/admin/roster", data={"csrf": form_token(client, "/admin")},
                        files={"file": ("roster.csv", csv)}, follow_redirects=False)
        assert r.status_code == 422 and "That roster was not accepted" in r.text
        assert "NUL" in r.text


# -- issue 26, item 7: secrets compared as bytes, file names as any browser reads them -------

class _RemoteDispatch(NoDispatch):
    """Takes remote results (it has a task secret) and dispatches nothing."""

    secret = b"task-secret-for-the-test-0123456789"


def test_a_csrf_field_that_is_not_ascii_is_a_403_not_a_500(client):
    _signed_in_as_instructor(client)
    form_token(client, "/admin")  # the seed cookie is set
    r = client.post("/admin/regrade", data={"exercise": "safe_softmax", "confirm": "yes",
                                            "csrf": "é" * 40}, follow_redirects=False)
    assert r.status_code == 403 and "out of date or not ours" in r.text


def test_a_task_token_that_is_not_ascii_is_a_403_not_a_500(tmp_path):
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}", dispatcher=_RemoteDispatch()) as client:
        for token in ("é" * 64, "\udcff"):
            r = client.post("/internal/tasks/1/1/start", json={"worker": "w"},
                            headers={"X-Task-Token": token.encode("utf-8", "surrogateescape")})
            assert r.status_code == 403, r.text


@pytest.mark.parametrize("filename, stored, header", [
    ("a\r\nb.py", "ab.py", 'attachment; filename="{id}-ab.py"'),
    ("解答.py", "解答.py",
     "attachment; filename=\"{id}-.py\"; filename*=UTF-8''{id}-%E8%A7%A3%E7%AD%94.py"),
    ('say "hi".py', 'say "hi".py',
     "attachment; filename=\"{id}-say _hi_.py\"; filename*=UTF-8''{id}-say%20%22hi%22.py"),
])
def test_a_file_name_is_stored_clean_and_downloads_under_its_name(client, filename, stored,
                                                                   header):
    token = add_students(client, "ada")["ada"]
    # JSON carries the name as typed (a multipart upload percent-encodes CR, LF and quotes)
    r = client.post("/api/submissions", headers=auth(token), json={
        "exercise": "safe_softmax", "language": "triton", "filename": filename,
        "source": "def softmax(x):\n    return x\n"})
    assert r.status_code == 202, r.text
    sid = r.json()["id"]
    assert client.get(f"/api/submissions/{sid}", headers=auth(token)).json()["filename"] == stored
    client.post("/signin", data={"token": token, "csrf": form_token(client, "/signin")})
    download = client.get(f"/submissions/{sid}/download/source")
    assert download.status_code == 200
    assert download.headers["content-disposition"] == header.format(id=sid)
    assert download.text.startswith("def softmax")
