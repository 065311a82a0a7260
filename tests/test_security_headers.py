"""Issue 39: every response carries a Content-Security-Policy that allows only the app's own
scripts and styles, and nothing the app writes is cached (the pages show tokens and sources).

The pages are opened in Chromium, as a student and as the instructor, at 1366 and 390 px,
and neither the page's ``securitypolicyviolation`` events nor its console may report
anything; a page that broke the policy (an inline script, an ``onclick``, a ``style``
attribute) fails here. Without a browser, every route's headers are read through the
TestClient, and the pages' HTML is searched for what the policy would refuse.
"""

import re
import time

import httpx
import pytest

from conftest import REPO, mutant_file
from server.core.security_headers import POLICY, api_page_policy
from test_server_api import ADMIN as API_ADMIN
from test_server_api import NoDispatch, _graded, add_students, auth, running
from test_web_pages import form_token
from test_web_pages import sign_in as sign_in_client
from test_web_ui import (ADMIN, SERVER_LOGS, _api_graded, _api_students, browser,  # noqa: F401
                         playwright, server, shot, sign_in)

EXERCISES = ("safe_softmax", "online_softmax", "masked_softmax")
DIRECTIVES = {d.split(" ", 1)[0]: d for d in POLICY.split("; ")}

# what the policy refuses in a page's markup: a script that is not data, an event handler
# attribute, a style attribute or element, a javascript: URL
INLINE = re.compile(r"<script(?![^>]*\b(?:src=|type=\"application/json\"))[^>]*>"
                    r"|\son[a-z]+\s*=|\sstyle\s*=|<style[\s>]|javascript:", re.I)


def test_the_policy_allows_only_the_apps_own_scripts_and_styles():
    assert DIRECTIVES["script-src"] == "script-src 'self'"
    assert DIRECTIVES["style-src"] == "style-src 'self'"
    assert DIRECTIVES["default-src"] == "default-src 'self'"
    assert DIRECTIVES["object-src"] == "object-src 'none'"
    assert DIRECTIVES["frame-ancestors"] == "frame-ancestors 'none'"
    assert "unsafe" not in POLICY and "http" not in POLICY and "*" not in POLICY


def _headers_ok(r, path, *, store=False):
    assert r.headers.get("content-security-policy") == POLICY, (path, dict(r.headers))
    assert r.headers.get("x-content-type-options") == "nosniff", path
    assert r.headers.get("referrer-policy") == "same-origin", path
    if not store:
        assert r.headers.get("cache-control") == "no-store", (path, r.headers.get("cache-control"))


def test_every_route_says_its_policy_and_nothing_is_stored(tmp_path):
    """Fails when the middleware is not there: each header is asserted on each route."""
    with running(f"sqlite:///{tmp_path / 'db'}", dispatcher=NoDispatch()) as client:
        tokens = add_students(client, "ada")
        with client.app.state.sessionmaker.begin() as db:
            first = _graded(db, "ada", 40.0, source="# ada's secret source\nx = 40\n")
            second = _graded(db, "ada", 100.0, source="# ada's secret source\nx = 100\n")
        pages = []  # (path, response) of each HTML page, to search for inline code below

        def get(path, **kw):
            r = client.get(path, **kw)
            _headers_ok(r, path)
            if r.headers.get("content-type", "").startswith("text/html"):
                pages.append((path, r))
            return r

        # signed out: the sign-in page (it takes a token) and the public pages
        for path in ("/signin", "/exercises", *(f"/exercises/{e}" for e in EXERCISES),
                     "/help/benchmarks", "/help/student-ci", "/leaderboard/safe_softmax",
                     "/exercises/safe_softmax/skeleton/triton", "/no-such-page", "/openapi.json"):
            get(path)
        assert get("/", follow_redirects=False).status_code == 303
        assert get("/me", follow_redirects=False).status_code == 303
        wrong = client.post("/signin", data={"token": "nope",
                                             "csrf": form_token(client, "/signin")})
        assert wrong.status_code == 401
        _headers_ok(wrong, "POST /signin")

        # a student: their source, parameters, downloads and diff
        sign_in_client(client, tokens["ada"])
        for path in ("/exercises/safe_softmax", f"/submissions/{first}",
                     f"/submissions/{first}/source", "/me", f"/me/diff?a={first}&b={second}"):
            assert get(path).status_code == 200, path
        assert "x = 40" in get(f"/submissions/{first}/download/source").text
        assert get(f"/submissions/{first}/download/result").status_code == 200
        assert get("/submissions/99999").status_code == 404
        # a refused submission gives the student's source back in the editor
        refused = client.post("/exercises/safe_softmax", data={
            "source": "", "language": "triton",
            "csrf": form_token(client, "/exercises/safe_softmax")})
        assert refused.status_code >= 400
        _headers_ok(refused, "POST /exercises/safe_softmax")
        pages.append(("POST /exercises/safe_softmax", refused))
        # the API: a submission with its source, and the list
        for path in (f"/api/submissions/{first}", "/api/submissions", "/api/exercises"):
            get(path, headers=auth(tokens["ada"]))

        # the instructor: a roster's tokens (the page and the API), sources, the report
        sign_in_client(client, API_ADMIN)
        for path in ("/admin", f"/admin/source/{first}", "/admin/similarity/safe_softmax",
                     f"/admin/similarity/safe_softmax/pair/{first}/{second}"):
            get(path)
        r = client.post("/admin/roster", data={"text": "username,display_name\nbob,Bob\n",
                                               "csrf": form_token(client, "/admin")},
                        follow_redirects=False)
        assert r.status_code == 303
        _headers_ok(r, "POST /admin/roster")
        tokens_page = get(r.headers["location"])
        assert "<code class=\"token\">" in tokens_page.text
        issued = client.post("/api/admin/students", headers=auth(API_ADMIN),
                             json={"students": [{"username": "cy", "display_name": "Cy"}]})
        assert issued.json()["students"][0]["token"]
        _headers_ok(issued, "POST /api/admin/students")
        assert "secret source" in get(f"/api/admin/submissions/{first}/source",
                                      headers=auth(API_ADMIN)).text
        get("/api/admin/export.csv", headers=auth(API_ADMIN))
        get("/api/admin/submissions", headers=auth(API_ADMIN))

        # what may be cached keeps its own way: the leaderboard's ETag (304s), the static files
        board = client.get("/api/leaderboard/safe_softmax")
        _headers_ok(board, "/api/leaderboard", store=True)
        assert board.headers["cache-control"] == "no-cache" and board.headers["etag"]
        again = client.get("/api/leaderboard/safe_softmax",
                           headers={"If-None-Match": board.headers["etag"]})
        assert again.status_code == 304 and again.headers["cache-control"] == "no-cache"
        for path in ("/static/style.css", "/static/editor.js", "/static/poll.js"):
            r = client.get(path)
            _headers_ok(r, path, store=True)
            assert "cache-control" not in r.headers, path

        # FastAPI's own API pages: the CDN their UI comes from, their inline script by its hash
        for path in ("/docs", "/docs/oauth2-redirect", "/redoc"):
            r = client.get(path)
            policy = r.headers["content-security-policy"]
            assert policy == api_page_policy(r.content) and "frame-ancestors 'none'" in policy
            script_src = next(d for d in policy.split("; ") if d.startswith("script-src"))
            assert "unsafe" not in script_src
            if "<script>" in r.text:
                assert "'sha256-" in script_src, path
            assert r.headers["cache-control"] == "no-store"

        # and no page holds what the policy would refuse
        assert len(pages) > 20
        for path, r in pages:
            found = INLINE.search(r.text)
            assert found is None, f"{path}: {r.text[max(0, found.start() - 80):found.end() + 80]}"


# -- in Chromium ----------------------------------------------------------------------------

# a page's policy violations, as the page itself sees them (before any script of the page)
WATCH = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(
  `${e.violatedDirective} blocked ${e.blockedURI || 'inline'} at ${e.sourceFile}:${e.lineNumber} ${e.sample}`));
"""
# Chromium's own line for a page answered with an error status (a 404 page, a refused form)
ERROR_STATUS = "Failed to load resource: the server responded with a status of"


class Watched:
    """A browser context whose every page's console errors, page errors, CSP violations and
    document responses are kept."""

    def __init__(self, browser, base, token, viewport):  # noqa: F811
        self.page = sign_in(browser, base, token, viewport=viewport) if token else \
            browser.new_context(viewport=viewport).new_page()
        self.page.context.add_init_script(WATCH)
        self.page.reload()  # the init script is in from the next document
        self.problems: list[str] = []
        self.documents: list = []
        self.page.on("console", lambda m: m.type in ("error", "warning") and self.problems.append(
            f"console {m.type}: {m.text} ({m.location.get('url')})"))
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("response", lambda r: r.request.resource_type == "document"
                     and self.documents.append(r))

    def check(self, allow_status: bool = False):
        """After a page: no violation it saw, and no console error but, where the page's own
        status was an error on purpose, Chromium's line saying so."""
        self.page.wait_for_load_state("load")
        violations = self.page.evaluate("window.__csp || ['no watcher on this page']")
        problems = [p for p in self.problems if not (allow_status and ERROR_STATUS in p)]
        self.problems.clear()
        assert violations == [] and problems == [], (self.page.url, violations, problems)

    def goto(self, url, allow_status=False):
        self.page.goto(url)
        self.check(allow_status)


@pytest.fixture(scope="module")
def graded(server):
    """A student with a failed attempt (the diff needs two), and a similarity report."""
    token = _api_students(server, "cspstudent")["cspstudent"]
    failed = _api_graded(server, token, mutant_file("safe_softmax", "naive_unsafe_exp"))
    passed = _api_graded(server, token, REPO / "reference_solutions/safe_softmax/solution.py")
    # another student's copy, so that the report has a pair to show
    other = _api_students(server, "cspcopy")["cspcopy"]
    copy = _api_graded(server, other, REPO / "reference_solutions/safe_softmax/solution.py")
    admin = {"Authorization": f"Bearer {ADMIN}"}
    httpx.post(f"{server}/api/admin/similarity/safe_softmax", headers=admin, timeout=30)
    for _ in range(600):
        report = httpx.get(f"{server}/api/admin/similarity/safe_softmax", headers=admin).json()
        if report["status"] != "running":
            break
        time.sleep(0.2)
    assert report["status"] == "done", report
    pair = next(p for p in report["pairs"] if {p["a"], p["b"]} == {passed, copy})
    return token, failed, passed, (pair["a"], pair["b"])


@pytest.mark.parametrize("width", [1366, 390])
def test_every_page_in_chromium_keeps_its_policy(server, browser, graded, width):  # noqa: F811
    base = server
    token, failed, passed, (a, b) = graded
    viewport = {"width": width, "height": 900 if width > 500 else 844}

    # signed out: the sign-in page, a wrong token, the public pages, an error page
    visitor = Watched(browser, base, None, viewport)
    visitor.goto(f"{base}/signin")
    visitor.page.get_by_label("Your token").fill("not-a-token")
    visitor.page.get_by_role("button", name="Sign in").click()
    assert "not known" in visitor.page.get_by_role("alert").inner_text()
    visitor.check(allow_status=True)  # 401
    for path in ("/exercises", "/exercises/safe_softmax", "/leaderboard/safe_softmax",
                 "/help/benchmarks"):
        visitor.goto(f"{base}{path}")
    visitor.goto(f"{base}/no-such-page", allow_status=True)
    assert visitor.page.get_by_role("heading", name="Not found").is_visible()

    # the student: each exercise with its editor, a refused submission, a submission
    # watched until it is graded, its source, their own list, the diff, the leaderboard
    student = Watched(browser, base, token, viewport)
    page = student.page
    for name in EXERCISES:
        student.goto(f"{base}/exercises/{name}")
    student.goto(f"{base}/exercises/safe_softmax")
    page.get_by_label("Language").select_option("hip")  # editor.js swaps the skeleton
    assert "__global__" in page.get_by_label("Your code").input_value()
    page.get_by_label("Language").select_option("triton")
    page.get_by_label("Your code").fill("")
    with page.expect_navigation():
        page.get_by_role("button", name="Submit for grading").click()
    assert "empty" in page.locator("#submit-error").inner_text()
    student.check(allow_status=True)
    if width == 1366:  # one submission through the editor, watched live (poll.js, its stream)
        page.get_by_label("Your code").fill(
            (REPO / "reference_solutions/safe_softmax/solution.py").read_text())
        page.get_by_role("button", name="Submit for grading").click()
        page.wait_for_url(f"{base}/submissions/*")
        try:
            page.locator("#verdict").wait_for(timeout=180_000)
        except playwright.TimeoutError:  # one CI run of five: say what the server did
            sid = page.url.rsplit("/", 1)[-1]
            status = httpx.get(f"{base}/api/submissions/{sid}",
                               headers={"Authorization": f"Bearer {token}"}).text[:800]
            log = SERVER_LOGS[base].read_text()[-6000:]
            raise AssertionError(f"no verdict on the page in 180 s; the API says {status}; "
                                 f"the server's log ends:\n{log}") from None
        assert page.locator("#verdict").inner_text() == "passed"
        student.check()
    for path in (f"/submissions/{passed}", f"/submissions/{failed}",
                 f"/submissions/{failed}/source", "/me", f"/me/diff?a={failed}&b={passed}",
                 "/leaderboard/safe_softmax", "/help/student-ci"):
        student.goto(f"{base}{path}")
    student.goto(f"{base}/submissions/{passed}")
    shot(page, f"csp-submission-{width}")
    student.goto(f"{base}/submissions/999999", allow_status=True)
    student.goto(f"{base}/admin", allow_status=True)  # 403, a page

    # the instructor: the admin page, a roster's tokens, a source, the similarity report
    teacher = Watched(browser, base, ADMIN, viewport)
    page = teacher.page
    teacher.goto(f"{base}/admin")
    page.get_by_label("…or paste its lines").fill(
        f"username,display_name\ncsp{width},Csp {width}\n")
    page.get_by_role("button", name="Upload roster").click()
    page.wait_for_url(f"{base}/admin/roster/*")
    assert page.locator("#tokens tbody tr").count() == 1
    teacher.check()
    shot(page, f"csp-roster-{width}")
    for path in (f"/admin/source/{failed}", "/admin?student=cspstudent",
                 "/admin/similarity/safe_softmax", f"/submissions/{passed}"):
        teacher.goto(f"{base}{path}")
    teacher.goto(f"{base}/admin/similarity/safe_softmax/pair/{a}/{b}")
    assert page.locator("#first-source mark").count() >= 1

    # every document had the policy, and every one of them (they show tokens, sources, or
    # at least the reader's name and form token) was not to be stored
    documents = visitor.documents + student.documents + teacher.documents
    assert len(documents) > 25
    for r in documents:
        headers = r.all_headers()
        assert headers.get("content-security-policy") == POLICY, r.url
        assert headers.get("cache-control") == "no-store", r.url
        assert headers.get("x-content-type-options") == "nosniff", r.url

    # the watch is no blind spot: a style attribute that a page gained is reported
    page.evaluate("document.body.insertAdjacentHTML('beforeend', '<p style=\"color: red\">x</p>')")
    page.wait_for_function("window.__csp.length > 0")
    assert page.evaluate("window.__csp[0]").startswith("style-src")
