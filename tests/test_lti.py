"""Issue 40: the autograder as an LTI 1.3 tool, against an LMS that is not our code.

The LMS is tests/lti_platform.py, built on ``lti1p3platform``, on 127.0.0.1 over real HTTP;
the tool is the real server (``python -m server``) on localhost (another site, as an LMS
and a tool are), set up by its CLI (``lti keys rotate``, ``lti register``). In order, as a
course would live it: an instructor adds an activity by deep linking; a student launches
it, lands signed in, gets an API token, and their gradings' scores reach the LMS's line
item (a new best, a regrade that changes nothing, a flag that changes it); the LMS is down
during a push and the score arrives once it is back; the roster comes by NRPS; and every
bad launch is refused with a page that says why, never a 500.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import time
from urllib.parse import urlencode

import httpx
import pytest
import requests

from conftest import REPO, mutant_file
from lti_platform import INSTRUCTOR, LEARNER, Platform, Served, new_key
from services import free_port, until

ADMIN = "lti-admin-token-0123456789"
SOLUTION = REPO / "reference_solutions/safe_softmax/solution.py"


def _env(tmp) -> dict:
    return dict(os.environ, DATABASE_URL=f"sqlite:///{tmp / 'lti.db'}", ADMIN_TOKEN=ADMIN,
                GRADER_DEVICE="cpu", LTI_KEYS_DIR=str(tmp / "keys"))


def _cli(env, *args) -> str:
    done = subprocess.run([sys.executable, "-m", "server", "lti", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def lms(tmp_path_factory):
    """(platform, tool base URL, the tool's log): registered by the CLI, both serving."""
    tmp = tmp_path_factory.mktemp("lti")
    port, tool_port = free_port(), free_port()
    tool = f"http://localhost:{tool_port}"
    platform = Platform(port=port, tool=tool)
    env = dict(_env(tmp), PUBLIC_URL=tool)
    assert "new key" in _cli(env, "keys", "rotate")
    said = _cli(env, "register", "--issuer", platform.url, "--client-id", platform.client_id,
                "--deployment", platform.deployment_id, "--auth-url", f"{platform.url}/authorize",
                "--token-url", f"{platform.url}/token", "--jwks-url", f"{platform.url}/jwks")
    assert f"framed by {platform.url}" in said
    assert platform.client_id in _cli(env, "list")
    served = Served(platform)
    served.start()
    log = open(tmp / "server.log", "wb")  # noqa: SIM115 - open while the server runs
    proc = subprocess.Popen([sys.executable, "-m", "server", "--port", str(tool_port)],
                            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            if httpx.get(f"{tool}/api/health").status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    yield platform, tool, tmp / "server.log", served
    proc.terminate()
    proc.wait(timeout=30)
    log.close()
    served.stop()


def _form(page: str) -> tuple[str, dict]:
    action = html.unescape(re.search(r'<form[^>]*action="([^"]+)"', page).group(1))
    fields = {k: html.unescape(v) for k, v in
              re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page)}
    return action, fields


def launch(platform: Platform, user: str, *, role=LEARNER, activity="", deep=False,
           keep_cookie=True):
    """A browser's launch: the click, the tool's login, the LMS's auth answer, the post.
    The state cookie goes back by hand: it is Secure, which Python's cookie jars send only
    over https (Chromium keeps it on http://localhost: test_launch_in_a_frame)."""
    start = requests.get(platform.start_url(user, role=role, activity=activity, deep=deep),
                         allow_redirects=False)
    login = requests.get(start.headers["location"], allow_redirects=False)
    assert login.status_code == 302, login.text[:500]
    # (Python 3.11's cookie parser does not know Partitioned: read by hand)
    pair, *attributes = [p.strip() for p in login.headers["set-cookie"].split(";")]
    assert {"Secure", "HttpOnly", "SameSite=None", "Partitioned"} <= set(attributes)
    answer = requests.get(login.headers["location"])
    action, fields = _form(answer.text)
    headers = {"Cookie": pair} if keep_cookie else {}
    posted = requests.post(action, data=fields, headers=headers, allow_redirects=False)
    return posted, (action, fields, headers)


def enter(tool: str, page: str) -> requests.Session:
    """The frame's "Open in a new tab": a browser of its own, signed in by the link."""
    code = re.search(r'href="/lti/enter/([^"]+)"', page).group(1)
    browser = requests.Session()
    asks = browser.get(f"{tool}/lti/enter/{code}", allow_redirects=False)
    assert asks.status_code == 200 and "Continue as" in asks.text, asks.text
    assert "autograder_session" not in browser.cookies, "a GET signs no one in"
    r = browser.post(f"{tool}/lti/enter", data={"code": code}, allow_redirects=False)
    assert r.status_code == 303, r.text
    again = requests.post(f"{tool}/lti/enter", data={"code": code}, allow_redirects=False)
    assert again.headers["location"].startswith("/signin"), "a code works once"
    assert "used already" in requests.get(f"{tool}{again.headers['location']}").text
    browser.landing = browser.get(f"{tool}{r.headers['location']}")
    return browser



def _csrf(page: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)


@pytest.fixture(scope="module")
def activity(lms):
    """The instructor adds safe_softmax to the course by deep linking."""
    platform, tool, _, _ = lms
    picker, _ = launch(platform, "teacher-1", role=INSTRUCTOR, deep=True)
    assert picker.status_code == 200 and "Add an exercise" in picker.text
    policy = picker.headers["content-security-policy"]
    assert f"frame-ancestors {platform.url}" in policy  # the LMS frames it, no one else
    key = re.search(r'name="launch" value="([^"]+)"', picker.text).group(1)
    chosen = requests.post(f"{tool}/lti/deep-link", data={"launch": key,
                                                          "exercise": "safe_softmax"})
    assert chosen.status_code == 200, chosen.text
    assert platform.url in chosen.headers["content-security-policy"].split("form-action")[1]
    action, fields = _form(chosen.text)
    assert action == f"{platform.url}/dl_return"
    back = requests.post(action, data=fields)  # the LMS checks our signature by our JWKS
    assert back.status_code == 200, back.text
    again = requests.post(f"{tool}/lti/deep-link", data={"launch": key,
                                                         "exercise": "safe_softmax"})
    assert again.status_code == 400 and "made already" in again.text
    (made,) = platform.activities.values()
    assert made.custom == {"exercise": "safe_softmax"}
    return made


def test_a_learner_lands_signed_in_and_scores_reach_the_lms(lms, activity):
    platform, tool, log, served = lms
    platform.names["stud-7"] = "Ada Lovelace"
    page, _ = launch(platform, "stud-7", activity=activity.id)
    assert page.status_code == 200, page.text
    assert "Safe softmax" in page.text or "safe" in page.text.lower()
    assert f"frame-ancestors {platform.url}" in page.headers["content-security-policy"]
    browser = enter(tool, page.text)
    assert browser.landing.url.endswith("/exercises/safe_softmax")
    assert "Ada Lovelace" in browser.landing.text  # signed in, by the LMS's name

    # an API token for curl, from their page (they were never handed one)
    me = browser.get(f"{tool}/me")
    issued = browser.post(f"{tool}/me/token", data={"csrf": _csrf(me.text)})
    token = re.search(r'id="api-token">([^<]+)<', issued.text).group(1)
    headers = {"Authorization": f"Bearer {token}"}
    assert requests.get(f"{tool}/api/submissions", headers=headers).status_code == 200
    assert browser.get(f"{tool}/me").url.endswith("/me"), "still signed in after the new token"

    def graded(path) -> dict:
        r = requests.post(f"{tool}/api/submissions", headers=headers, timeout=30, json={
            "exercise": "safe_softmax", "language": "triton", "source": path.read_text()})
        sid = r.json()["id"]

        def seen():
            return requests.get(f"{tool}/api/submissions/{sid}", headers=headers).json()
        assert until(lambda: seen()["status"] == "graded", 300), f"grading {sid}"
        return seen()

    def scores_sent():
        return [score for item, score in platform.scores if item == "li-1"]

    wrong = graded(mutant_file("safe_softmax", "naive_unsafe_exp"))
    assert until(scores_sent, 60), "the first score's push"
    first = scores_sent()
    assert first[-1]["scoreGiven"] == wrong["score"] and first[-1]["userId"] == "stud-7"
    assert first[-1]["activityProgress"] == "Completed"
    assert first[-1]["gradingProgress"] == "FullyGraded" and first[-1]["scoreMaximum"] == 100
    right = graded(SOLUTION)
    assert right["score"] > wrong["score"]
    assert until(lambda: scores_sent()[-1]["scoreGiven"] == right["score"], 60), "better score"
    count = len(scores_sent())

    # a regrade that changes nothing sends nothing again
    admin = {"Authorization": f"Bearer {ADMIN}"}
    requests.post(f"{tool}/api/admin/regrade", headers=admin, json={"exercise": "safe_softmax"})
    assert until(lambda: all(s["status"] == "graded" and not s["regrading"] for s in requests.get(
        f"{tool}/api/submissions", headers=headers).json()["submissions"]), 300), "the regrade"
    time.sleep(3)  # a sender round or more
    assert len(scores_sent()) == count, scores_sent()[count:]

    # the LMS goes down; the instructor invalidates the best: its score is owed, and
    # arrives once the LMS is back
    served.stop()
    r = requests.post(f"{tool}/api/admin/submissions/{right['id']}/flag", headers=admin,
                      json={"flag": "invalidated"})
    assert r.status_code == 200
    assert until(lambda: "not taken by" in log.read_text(), 60), "a failed push"
    served.start()
    assert until(lambda: scores_sent()[-1]["scoreGiven"] == wrong["score"]
                 and len(scores_sent()) == count + 1, 90), "the owed score once the LMS is back"
    time.sleep(3)
    assert len(scores_sent()) == count + 1, "sent once"


def test_the_roster_comes_from_the_lms(lms, activity):
    platform, tool, _, _ = lms
    platform.members = [
        {"user_id": "stud-20", "name": "Grace Hopper", "status": "Active", "roles": [LEARNER]},
        {"user_id": "stud-21", "name": "Alan Turing", "status": "Active", "roles": [LEARNER]},
        {"user_id": "stud-22", "name": "Gone Student", "status": "Inactive", "roles": [LEARNER]},
        {"user_id": "teacher-2", "name": "Co Teacher", "status": "Active",
         "roles": [INSTRUCTOR]}]
    page, _ = launch(platform, "teacher-1", role=INSTRUCTOR, activity=activity.id)
    teacher = enter(tool, page.text)
    admin_page = teacher.get(f"{tool}/admin/lti")
    assert admin_page.status_code == 200
    for url in ("/lti/login", "/lti/launch", "/lti/jwks.json"):
        assert f"{tool}{url}" in admin_page.text
    pulled = teacher.post(f"{tool}/admin/lti/roster", data={
        "csrf": _csrf(admin_page.text), "platform_id": "1", "context_id": "course-1"})
    assert pulled.status_code == 200, pulled.text
    assert "2 students, 1 instructors, 1 inactive left out" in pulled.text
    students = requests.get(f"{tool}/api/admin/export.csv",
                            headers={"Authorization": f"Bearer {ADMIN}"}).text
    assert "Grace Hopper" in students and "Alan Turing" in students
    assert "Gone Student" not in students


@pytest.mark.parametrize("bend, words", [
    ({}, "used already"),  # the same launch posted twice
    ({"no_cookie": True}, "sign-in state is missing"),
    ({"expires_in": -120}, "expired"),
    ({"signing_key": "other", "forge_kid": True}, "signature does not verify"),
    ({"signing_key": "other"}, "signing key is not in the LMS"),
    ({"deployment_id": "dep-foreign"}, "deployment of the tool is not registered"),
])
def test_a_bad_launch_is_refused_with_a_page_that_says_why(lms, activity, bend, words):
    platform, tool, log, _ = lms
    changes = {k: v for k, v in bend.items() if k != "no_cookie"}
    if changes.get("signing_key") == "other":
        changes["signing_key"] = new_key()[0]
    platform.launch_changes = changes
    try:
        first, (action, fields, headers) = launch(platform, "stud-9", activity=activity.id,
                                                  keep_cookie="no_cookie" not in bend)
    finally:
        platform.launch_changes = {}
    if not bend:  # a good launch, then its replay
        assert first.status_code == 200
        first = requests.post(action, data=fields, headers=headers)
    assert 400 <= first.status_code < 500, first.text
    assert words in html.unescape(first.text), first.text
    assert "href=\"/lti/enter/" not in first.text
    # the LMS the token names may frame the refusal (the page says why, in the frame)
    assert f"frame-ancestors {platform.url}" in first.headers["content-security-policy"]
    assert "launch refused" in log.read_text()


def test_a_launch_inside_the_lms_frame_with_third_party_cookies_blocked(lms, activity,
                                                                          tmp_path):
    """Chromium, the LMS's course page (127.0.0.1) framing the tool (localhost, another
    site), third-party cookies blocked by the browser's own setting: the launch goes
    through in the frame (its state cookie is partitioned), and "Open in a new tab" ends on
    the student's exercise page, signed in."""
    from test_web_ui import CHROMIUM, playwright, shot
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser tests: install chromium (scripts/setup does)")
        pytest.skip("no chromium here")
    platform, tool, _, _ = lms
    platform.names["stud-30"] = "Katherine Johnson"
    profile = tmp_path / "profile"
    (profile / "Default").mkdir(parents=True)
    # Chromium's "Block third-party cookies" (its settings page's choice), set explicitly:
    # a build's default must not be what the test relies on
    (profile / "Default" / "Preferences").write_text(json.dumps(
        {"profile": {"cookie_controls_mode": 1, "block_third_party_cookies": True}}))
    course = f"{platform.url}/course?" + urlencode(
        {"src": platform.start_url("stud-30", activity=activity.id)})
    with playwright.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), headless=True, executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"])
        try:
            page = context.new_page()
            page.goto(course)
            frame = page.frame_locator("#tool")
            frame.get_by_text("Signed in from your course as Katherine Johnson").wait_for(
                timeout=60_000)
            # an unpartitioned cookie would not have come back in the frame: only the
            # partitioned one did (keyed to the LMS's site)
            kept = [c for c in context.cookies() if c["name"].startswith("lti1p3-state")]
            assert kept and all(c.get("partitionKey") for c in kept), kept
            with context.expect_page() as opened:
                frame.get_by_role("link", name="Open in a new tab").click()
            tab = opened.value
            shot(page, "lti-frame")
            tab.get_by_role("button", name="Continue as Katherine Johnson").click()
            tab.wait_for_url(f"{tool}/exercises/safe_softmax", timeout=60_000)
            assert tab.get_by_text("Katherine Johnson").first.is_visible()
            assert tab.get_by_role("link", name="My submissions").is_visible()

            # the instructor's LMS page, at a phone's width: nothing wider than the screen
            entry, _ = launch(platform, "teacher-1", role=INSTRUCTOR, activity=activity.id)
            code = re.search(r'href="(/lti/enter/[^"]+)"', entry.text).group(1)
            tab.set_viewport_size({"width": 390, "height": 844})
            tab.goto(f"{tool}{code}")
            tab.get_by_role("button", name="Continue as").click()
            tab.wait_for_url(f"{tool}/exercises/safe_softmax", timeout=60_000)
            tab.goto(f"{tool}/admin/lti")
            assert tab.get_by_role("heading", name="LMS (LTI 1.3)").is_visible()
            assert tab.get_by_text(f"{tool}/lti/jwks.json").is_visible()
            assert tab.evaluate("document.documentElement.scrollWidth") <= 390
            shot(tab, "lti-admin-390")
        finally:
            context.close()


def test_what_no_lms_sent_is_refused_in_words_never_a_500(lms):
    platform, tool, _, _ = lms
    for method, path, data in [
            ("post", "/lti/launch", {"id_token": "not.a.jwt", "state": "state-x"}),
            ("post", "/lti/launch", {}),
            ("get", "/lti/login", {}),
            ("get", "/lti/login?iss=https://unknown.example&login_hint=u", None),
            ("post", "/lti/deep-link", {"launch": "made-up", "exercise": "safe_softmax"}),
            ("post", "/lti/deep-link", {"launch": "made-up", "exercise": "no_such"})]:
        r = getattr(requests, method)(f"{tool}{path}", data=data, allow_redirects=False)
        assert 400 <= r.status_code < 500, (path, r.status_code, r.text[:300])
        assert "refused" in r.text, (path, r.text[:300])
    lost = requests.post(f"{tool}/lti/enter", data={"code": "made-up"}, allow_redirects=False)
    assert lost.status_code == 303 and lost.headers["location"].startswith("/signin")
    lost = requests.get(f"{tool}/lti/enter/made-up-code", allow_redirects=False)
    assert lost.status_code == 303 and lost.headers["location"].startswith("/signin")
    keys = requests.get(f"{tool}/lti/jwks.json").json()["keys"]
    assert keys and all(k["kty"] == "RSA" and "d" not in k for k in keys)
