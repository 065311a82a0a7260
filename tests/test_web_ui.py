"""Browser tests: Playwright drives Debian's Chromium against a real server and real grader.

A student signs in, submits the reference solution and a course mutant through the page,
watches both finish, sees `passed` for one and the named failing check with its row dump
for the other, and sees the leaderboard; an instructor uploads a roster, flags a submission
(it leaves the leaderboard) and downloads the CSV. Every page is saved as a screenshot under
artifacts/screenshots/ (not committed).
"""

import os
import shutil
import subprocess
import sys
import time

import httpx
import pytest

from conftest import REPO, mutant_file
from services import free_port

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = REPO / "artifacts" / "screenshots"
ADMIN = "web-admin-token-0123"

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect


SERVER_LOGS: dict = {}  # a module's server (its base URL) -> its log file


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser tests: install chromium (scripts/setup does)")
        pytest.skip("no chromium here")
    port = free_port()
    db = tmp_path_factory.mktemp("web") / "web.db"
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{db}", ADMIN_TOKEN=ADMIN, GRADER_DEVICE="cpu")
    # its log, for a test that must say what the server did when a page waited in vain
    log = open(db.parent / "server.log", "wb")  # noqa: SIM115 - open while the server runs
    proc = subprocess.Popen([sys.executable, "-m", "server", "--port", str(port)], cwd=REPO,
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    SERVER_LOGS[base] = db.parent / "server.log"
    for _ in range(300):
        try:
            if httpx.get(f"{base}/api/health").status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    yield base
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


@pytest.fixture(scope="module")
def browser():
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        yield b
        b.close()


def shot(page, name):
    # for people to look at: .ci/run sets SCREENSHOTS=0, as no one looks there and a
    # full-page shot of a long page costs a second of the CPU the other tests need
    if os.environ.get("SCREENSHOTS") != "0":
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def sign_in(browser, base, token, viewport=None, color_scheme="light"):
    context = browser.new_context(viewport=viewport or {"width": 1280, "height": 900},
                                  accept_downloads=True, color_scheme=color_scheme)
    page = context.new_page()
    page.goto(f"{base}/signin")
    page.get_by_label("Your token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{base}/exercises")
    return page


def _verdict_once_graded(page, base) -> str:
    """After a submit: the submission's page, then its verdict once it is graded."""
    page.wait_for_url(f"{base}/submissions/*")
    page.locator("#verdict").wait_for(timeout=180_000)
    return page.locator("#verdict").inner_text()


def test_student_and_instructor_in_the_browser(server, browser, tmp_path):
    base = server
    # the sign-in page, and a wrong token
    page = browser.new_page()
    page.goto(f"{base}/signin")
    shot(page, "signin")
    page.get_by_label("Your token").fill("not-a-token")
    page.get_by_role("button", name="Sign in").click()
    assert "not known" in page.get_by_role("alert").inner_text()
    page.close()

    # the instructor uploads a roster; tokens are shown once
    teacher = sign_in(browser, base, ADMIN)
    teacher.goto(f"{base}/admin")
    roster = tmp_path / "roster.csv"
    roster.write_text("username,display_name\nada,Ada Lovelace\nbob,Bob Kahan\n")
    teacher.get_by_label("CSV with a header row").set_input_files(str(roster))
    teacher.get_by_role("button", name="Upload roster").click()
    teacher.wait_for_url(f"{base}/admin/roster/*")
    rows = [[cell.inner_text() for cell in row.locator("td").all()]
            for row in teacher.locator("#tokens tbody tr").all()]
    tokens = {username: token for username, _, token in rows}
    assert {(u, d) for u, d, _ in rows} == {("ada", "Ada Lovelace"), ("bob", "Bob Kahan")}
    shot(teacher, "admin-roster")
    # the tokens as a file
    with teacher.expect_download() as info:
        teacher.get_by_role("link", name="Download the tokens (CSV)").click()
    downloaded = open(info.value.path(), encoding="utf-8-sig").read().splitlines()
    assert downloaded[0] == "username,display_name,token"
    assert f"ada,Ada Lovelace,{tokens['ada']}" in downloaded
    # a reload posts nothing again: the tokens are gone from the page and still valid
    teacher.reload()
    assert "shown once and are gone" in teacher.locator("main").inner_text()
    assert teacher.locator("#tokens").count() == 0
    for token in tokens.values():
        assert httpx.get(f"{base}/api/submissions",
                         headers={"Authorization": f"Bearer {token}"}).status_code == 200
    shot(teacher, "admin-roster-reloaded")

    # the student: exercises, a statement, a validation error beside the form
    student = sign_in(browser, base, tokens["ada"])
    shot(student, "exercises")
    student.get_by_role("link", name="Safe softmax").click()
    assert student.get_by_role("heading", name="Safe softmax").first.is_visible()
    assert "def softmax" in student.get_by_label("Your code").input_value()  # the skeleton
    shot(student, "exercise")
    student.get_by_label("Your code").fill("")
    student.get_by_role("button", name="Submit for grading").click()
    assert "empty" in student.locator("#submit-error").inner_text()

    # the reference through the editor: watch it finish, passed
    reference = (REPO / "reference_solutions/safe_softmax/solution.py").read_text()
    student.get_by_label("Your code").fill(reference)
    asked: list[str] = []
    student.on("request", lambda request: asked.append(request.url))
    student.get_by_role("button", name="Submit for grading").click()
    student.wait_for_url(f"{base}/submissions/*")
    student.evaluate("window.__notReloaded = true")
    shot(student, "submission-pending")
    student.locator("#verdict").wait_for(timeout=180_000)
    assert student.locator("#verdict").inner_text() == "passed"
    # the result came in place (issue 14, item 7): no reload, the verdict announced to
    # screen readers, and the focus on it
    assert student.evaluate("window.__notReloaded === true")
    assert student.locator("#announce").inner_text().startswith("Graded: passed")
    assert student.evaluate("document.activeElement.id") == "verdict-h"
    # its progress came as a stream (issue 27), not as a request a second
    sid = student.url.split("#")[0].rsplit("/", 1)[1]
    assert f"{base}/api/submissions/{sid}/events" in asked
    assert f"{base}/api/submissions/{sid}" not in asked
    shot(student, "submission-passed")

    # a mutant by file upload: failed, the named check, its row dump with NaN highlighted
    student.goto(f"{base}/exercises/safe_softmax")
    mutant = mutant_file("safe_softmax", "naive_unsafe_exp")
    student.get_by_label("…or upload a file").set_input_files(str(mutant))
    student.get_by_role("button", name="Submit for grading").click()
    assert _verdict_once_graded(student, base) == "failed"
    failing = student.locator("tr.bad th", has_text="poisoned_row")
    assert failing.is_visible()
    assert "subtract the row max before exp" in student.locator(".check-message").first.inner_text()
    assert student.locator("table.dump td.nonfinite").first.inner_text() == "nan"
    shot(student, "submission-failed")

    student.get_by_role("link", name="My submissions").click()
    # count() does not wait for the new page; expect() does
    expect(student.locator("main table tbody tr")).to_have_count(2)
    shot(student, "my-submissions")

    # HIP: choosing it swaps in the HIP skeleton; without a GPU the verdict is `compiled`
    student.goto(f"{base}/exercises/safe_softmax")
    student.get_by_label("Language").select_option("hip")
    assert '__global__ void softmax(' in student.get_by_label("Your code").input_value()
    shot(student, "exercise-hip")
    student.get_by_role("button", name="Submit for grading").click()
    assert _verdict_once_graded(student, base) == "compiled"
    assert "without a GPU nothing was run" in student.locator("main").inner_text()
    assert student.get_by_role("row", name="random_rows").is_visible()  # listed, not run
    assert "submission.hip · hip" in student.locator("p.meta").first.inner_text()
    shot(student, "submission-hip-compiled")
    student.get_by_role("link", name="Leaderboards").click()
    student.get_by_role("navigation", name="Exercises").get_by_role("link", name="Safe softmax").click()
    board = student.locator("table.board tbody tr").first
    assert "Ada Lovelace" in board.inner_text() and "100" in board.inner_text()
    shot(student, "leaderboard")

    # on a phone
    phone = sign_in(browser, base, tokens["bob"], viewport={"width": 390, "height": 844})
    phone.goto(f"{base}/leaderboard/safe_softmax")
    shot(phone, "leaderboard-phone")

    # the instructor flags the passing submission: it leaves the leaderboard
    teacher.goto(f"{base}/admin?student=ada&verdict=passed")
    row = teacher.locator("#submissions tbody tr").first
    passed_id = row.get_attribute("data-id")
    row.get_by_label(f"Flag for submission {passed_id}").select_option("invalidated")
    row.get_by_role("button", name="flag").click()
    teacher.goto(f"{base}/admin")
    shot(teacher, "admin-submissions")
    teacher.goto(f"{base}/leaderboard/safe_softmax")
    text = teacher.locator("table.board").inner_text()
    assert "100" not in text.replace("100%", "")  # Ada's best is now her failed 70
    shot(teacher, "leaderboard-after-flag")
    teacher.goto(f"{base}/admin/source/{passed_id}")
    assert "def softmax" in teacher.locator("pre.code").inner_text()
    shot(teacher, "admin-source")

    # and downloads the grades
    teacher.goto(f"{base}/admin")
    with teacher.expect_download() as info:
        teacher.get_by_role("link", name="Download grades (CSV)").click()
    csv_text = open(info.value.path(), encoding="utf-8-sig").read()
    assert csv_text.splitlines()[0].startswith("username,display_name,exercise,best_score")
    assert "ada,Ada Lovelace,safe_softmax,70.0" in csv_text


def _api_students(base, *names):
    r = httpx.post(f"{base}/api/admin/students", headers={"Authorization": f"Bearer {ADMIN}"},
                   json={"students": [{"username": n, "display_name": n.title() + " Longname"}
                                      for n in names]})
    return {s["username"]: s["token"] for s in r.json()["students"]}


def _api_graded(base, token, path) -> int:
    """A submission through the API, waited for until it is graded."""
    headers = {"Authorization": f"Bearer {token}"}
    r = httpx.post(f"{base}/api/submissions", headers=headers, timeout=30,
                   json={"exercise": "safe_softmax", "language": "triton",
                         "source": path.read_text()})
    sid = r.json()["id"]
    for _ in range(900):
        if httpx.get(f"{base}/api/submissions/{sid}", headers=headers).json()["status"] in (
                "graded", "error"):
            return sid
        time.sleep(0.2)
    raise AssertionError(f"submission {sid} was not graded")


WIDER_THAN_VIEWPORT = """() => {
  const doc = document.documentElement;
  const wide = [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > doc.clientWidth + 1)
    .filter(e => !e.closest('.scroll, pre, .editor, table.dump'))
    .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));
  return {scroll: doc.scrollWidth, client: doc.clientWidth, wide};
}"""


@pytest.fixture(scope="module")
def phone_student(server):
    """A student with one submission of each kind: passed, failed, compile error."""
    token = _api_students(server, "phone")["phone"]
    passed = _api_graded(server, token, REPO / "reference_solutions/safe_softmax/solution.py")
    failed = _api_graded(server, token, mutant_file("safe_softmax", "naive_unsafe_exp"))
    broken = _api_graded(server, token, REPO / "tests" / "fixtures" / "syntax_error.py")
    return token, passed, failed, broken


@pytest.mark.parametrize("width", [360, 390, 1366])
def test_no_page_is_wider_than_its_viewport(server, browser, phone_student, width):
    """Issue 14, item 2: at 390 px the pages measured 515-741 px (a phone; 1366 is a laptop). Tables and code now scroll
    inside their own box, long words and error text wrap, and the page fits its viewport."""
    base = server
    token, passed, failed, broken = phone_student
    viewport = {"width": width, "height": 844}
    student = sign_in(browser, base, token, viewport=viewport)
    teacher = sign_in(browser, base, ADMIN, viewport=viewport)
    pages = [(student, "/exercises"), (student, "/exercises/safe_softmax"),
             (student, "/exercises/online_softmax"), (student, f"/submissions/{passed}"),
             (student, f"/submissions/{failed}"), (student, f"/submissions/{broken}"),
             (student, "/me"), (student, "/leaderboard/safe_softmax"),
             (student, f"/submissions/{failed}/source"),
             (student, f"/me/diff?a={passed}&b={failed}"),
             (teacher, "/admin"), (teacher, f"/admin/source/{failed}"),
             (teacher, f"/submissions/{failed}")]
    too_wide = {}
    for page, path in pages:
        page.goto(f"{base}{path}")
        measured = page.evaluate(WIDER_THAN_VIEWPORT)
        shot(page, f"phone-{width}{path.replace('/', '-').replace('?', '-').replace('&', '-')}")
        if measured["scroll"] > measured["client"]:
            too_wide[path] = measured
    assert too_wide == {}, "\n".join(f"{p}: {m}" for p, m in too_wide.items())
    # the line of a syntax error is on screen, not past the right edge
    student.goto(f"{base}/submissions/{broken}")
    message = student.locator("main").get_by_text("line 4 of your file").first
    box = message.bounding_box()
    assert box is not None and box["x"] + box["width"] <= width
    # a student's own list shows each score without scrolling its table sideways
    student.goto(f"{base}/me")
    score = student.locator("main th", has_text="Score").first.bounding_box()
    assert score is not None and score["x"] + score["width"] <= width
    assert student.locator("main td", has_text="compile_error").count() == 1


def test_dark_mode_follows_the_system(server, browser):
    """Issue 14: dark mode through prefers-color-scheme, light otherwise."""
    colours = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(color_scheme=scheme)
        page = context.new_page()
        page.goto(f"{server}/signin")
        colours[scheme] = page.evaluate(
            "() => [getComputedStyle(document.body).backgroundColor,"
            " getComputedStyle(document.body).color]")
        shot(page, f"signin-{scheme}")
        context.close()
    assert colours["light"] == ["rgb(248, 250, 252)", "rgb(15, 23, 42)"]
    assert colours["dark"] == ["rgb(11, 18, 32)", "rgb(226, 232, 240)"]


def _tab_to(page, element_id, limit=60):
    """Press Tab until ``element_id`` has the focus; the ids passed on the way."""
    seen = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        now = page.evaluate("document.activeElement.id || document.activeElement.tagName")
        seen.append(now)
        if now == element_id:
            return seen
    raise AssertionError(f"Tab never reached #{element_id}: {seen}")


def test_the_submit_form_by_keyboard_alone_and_a_hip_upload(server, browser, tmp_path):
    """Issue 14: the keyboard path through the submit form (Tab indents in the editor, Esc
    then Tab leaves it), and a .hip file uploaded with the picker left on Triton is HIP."""
    base = server
    token = _api_students(base, "keys")["keys"]
    page = sign_in(browser, base, token)
    page.goto(f"{base}/exercises/safe_softmax")
    before = _tab_to(page, "language")
    assert "source" not in before  # the picker comes before the editor
    _tab_to(page, "source")
    page.keyboard.press("Control+A")
    page.keyboard.type((REPO / "reference_solutions/safe_softmax/solution.py").read_text()
                       .split("\n\n\n")[0] + "\n")
    page.keyboard.press("Tab")  # inside the editor, Tab indents
    assert page.evaluate("document.activeElement.id") == "source"
    assert page.get_by_label("Your code").input_value().endswith("    ")
    page.keyboard.press("Escape")
    page.keyboard.press("Tab")  # Esc, then Tab, moves on
    assert page.evaluate("document.activeElement.id") == "file"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Submit for grading"
    page.keyboard.press("Enter")
    _verdict_once_graded(page, base)
    shot(page, "keyboard-submitted")

    # a .hip file, the picker left on triton: graded as HIP (compiled without a GPU)
    page.goto(f"{base}/exercises/safe_softmax")
    assert page.get_by_label("Language").input_value() == "triton"
    hip = REPO / "reference_solutions/safe_softmax/solution.hip"
    page.get_by_label("…or upload a file").set_input_files(str(hip))
    page.get_by_role("button", name="Submit for grading").click()
    assert _verdict_once_graded(page, base) == "compiled"
    assert "· hip" in page.locator("p.meta").first.inner_text()
    shot(page, "hip-upload-picker-on-triton")
