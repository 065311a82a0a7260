"""Every bad input answers a 4xx with {"detail"}, never a bare 500 (issue 12, item 7)."""

import pytest

from test_server_api import ADMIN, add_students, auth, running
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
