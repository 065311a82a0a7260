"""Cross-origin and token-less form posts are refused (issue 12, item 3).

The attack as it was found: a page on another port of the same host (the same *site*, so
SameSite=Lax still sends the cookie) posts a flag change as the instructor and a
submission as a student.
"""

import pytest

from test_server_api import ADMIN, PASS, add_students, auth, running
from test_web_pages import form_token

EVIL = {"Origin": "http://testserver:8666"}  # same host, another port


@pytest.fixture
def signed_in(tmp_path):
    """A client signed in as the instructor, with a student and one submission."""
    with running(f"sqlite:///{tmp_path / 'db.sqlite'}") as client:
        add_students(client, "ada")
        r = client.post("/signin", data={"token": ADMIN, "csrf": form_token(client, "/signin")},
                        follow_redirects=False)
        assert r.status_code == 303
        yield client


FORMS = {  # each state-changing form, with what it would change
    "/admin/flag": {"submission_id": "1", "flag": "invalidated"},
    "/admin/regrade": {"exercise": "safe_softmax", "confirm": "yes"},
    "/exercises/safe_softmax/submit": {"source": PASS, "language": "triton"},
    "/signout": {},
    "/signin": {"token": ADMIN},
}


@pytest.mark.parametrize("path", sorted(FORMS))
def test_a_cross_origin_post_is_refused_even_with_the_token(signed_in, path):
    token = form_token(signed_in, "/admin")
    r = signed_in.post(path, data={**FORMS[path], "csrf": token}, headers=EVIL,
                       follow_redirects=False)
    assert r.status_code == 403


@pytest.mark.parametrize("path", sorted(FORMS))
def test_a_post_without_the_pages_token_is_refused(signed_in, path):
    r = signed_in.post(path, data=FORMS[path], follow_redirects=False)
    assert r.status_code == 403
    r = signed_in.post(path, data={**FORMS[path], "csrf": "0" * 40}, follow_redirects=False)
    assert r.status_code == 403


def test_the_roster_upload_needs_the_token_too(signed_in):
    files = {"file": ("r.csv", "username,display_name\nbob,Bob\n", "text/csv")}
    assert signed_in.post("/admin/roster", files=files, follow_redirects=False).status_code == 403
    ok = signed_in.post("/admin/roster", files=files, data={"csrf": form_token(signed_in, "/admin")})
    assert ok.status_code == 200 and "bob" in ok.text


def test_the_pages_own_forms_still_work(signed_in):
    token = form_token(signed_in, "/admin")
    r = signed_in.post("/admin/regrade", data={"exercise": "safe_softmax", "confirm": "yes",
                                                "csrf": token},
                       headers={"Origin": "http://testserver"}, follow_redirects=False)
    assert r.status_code == 303


def test_the_api_does_not_take_the_cookie_for_changes(signed_in):
    r = signed_in.post("/api/admin/regrade", json={"exercise": "safe_softmax"})
    assert r.status_code == 403 and "Bearer" in r.json()["detail"]
    assert signed_in.get("/api/admin/submissions").status_code == 200  # reading still works
    r = signed_in.post("/api/admin/regrade", json={"exercise": "safe_softmax"},
                       headers=auth(ADMIN))
    assert r.status_code == 200


# -- issue 26, item 3: a page on another port, PUBLIC_URL unset (the embedded default) -------

@pytest.mark.parametrize("origin", ["null", "file://", "data:text/html,x"])
def test_an_opaque_origin_is_refused_with_public_url_unset(signed_in, origin):
    """A page that hides its referrer (or a sandboxed frame, a data: page) posts with
    ``Origin: null``; with PUBLIC_URL unset it matched the empty public origin and passed."""
    assert signed_in.app.state.settings.public_url == ""
    token = form_token(signed_in, "/admin")
    r = signed_in.post("/admin/flag", data={**FORMS["/admin/flag"], "csrf": token},
                       headers={"Origin": origin}, follow_redirects=False)
    assert r.status_code == 403 and "another site" in r.text


def test_a_planted_seed_with_the_attackers_own_token_is_refused(signed_in):
    """Cookies do not keep to a port: a page on another port of the host can set the seed
    cookie to one it got, with its token, from a visit of its own (signed out)."""
    from starlette.testclient import TestClient

    from server.auth.csrf import SEED_COOKIE

    with TestClient(signed_in.app) as attacker:
        attacker_token = form_token(attacker, "/signin")
        attacker_seed = attacker.cookies[SEED_COOKIE]
    signed_in.cookies.set(SEED_COOKIE, attacker_seed)  # planted in the instructor's browser
    r = signed_in.post("/admin/flag", data={**FORMS["/admin/flag"], "csrf": attacker_token},
                       follow_redirects=False)
    assert r.status_code == 403
    # the instructor's own page, with the planted seed, still works: the token is theirs
    mine = form_token(signed_in, "/admin")
    r = signed_in.post("/admin/flag", data={**FORMS["/admin/flag"], "csrf": mine},
                       follow_redirects=False)
    assert r.status_code == 404 and "nothing was flagged" in r.text  # past CSRF: no such row
