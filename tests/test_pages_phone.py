"""The submit flow on a phone, the editor's size, and the row dump's labels (issue 25).

On a 390 px phone the statement runs about 5,600 px before the form: a refused submission
came back at the top with its reason thousands of pixels below, and a long file grew the
editor past 4,500 px. These drive Debian's Chromium as a student would.
"""

from conftest import mutant_file
from test_web_ui import _api_graded, _api_students, browser, server, shot, sign_in  # noqa: F401

from graders.engine.report import progress_line
from graders.engine.results import CheckResult

PHONE = {"width": 390, "height": 844}


def test_a_refused_submission_on_a_phone_shows_its_reason_on_screen_and_focused(
        server, browser):  # noqa: F811
    token = _api_students(server, "thumbs")["thumbs"]
    page = sign_in(browser, server, token, viewport=PHONE)
    page.goto(f"{server}/exercises/safe_softmax")
    # a way to the form on the first screen, which leads there
    jump = page.get_by_role("link", name="Go to the submit form")
    assert jump.bounding_box()["y"] < PHONE["height"]
    jump.click()
    editor = page.locator("#source").bounding_box()
    assert 0 <= editor["y"] < PHONE["height"], editor
    # an empty editor is refused: the page opens at the form, on its reason, focused
    page.locator("#source").fill("")
    with page.expect_navigation():
        page.get_by_role("button", name="Submit for grading").click()
    error = page.locator("#submit-error")
    box = error.bounding_box()
    shot(page, "phone-refused-submission")
    assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= PHONE["height"], box
    assert page.evaluate("document.activeElement.id") == "submit-error"
    assert "empty" in error.inner_text()


def test_the_editor_keeps_its_height_and_scrolls_inside(server, browser):  # noqa: F811
    token = _api_students(server, "longfile")["longfile"]
    page = sign_in(browser, server, token, viewport=PHONE)
    page.goto(f"{server}/exercises/safe_softmax")
    long_file = "\n".join(f"x{i} = {i}" for i in range(241))
    page.locator("#source").fill(long_file)
    page.locator("#source").dispatch_event("input")
    editor = page.locator(".editor").bounding_box()
    submit = page.get_by_role("button", name="Submit for grading").bounding_box()
    assert editor["height"] <= 0.75 * PHONE["height"], editor  # 4,559 px before
    assert submit["y"] - editor["y"] < editor["height"] + 250, (editor, submit)
    # the line numbers scroll with the code: the last line's number is in view at the end
    page.locator("#source").evaluate("a => { a.scrollTop = a.scrollHeight; "
                                     "a.dispatchEvent(new Event('scroll')); }")
    gutter_top = page.locator(".editor .gutter").evaluate("g => g.scrollTop")
    assert gutter_top > 0
    shot(page, "phone-long-file")


def test_the_dump_keeps_its_labels_narrow_and_in_view(server, browser):  # noqa: F811
    token = _api_students(server, "dumps")["dumps"]
    failed = _api_graded(server, token, mutant_file("safe_softmax", "naive_unsafe_exp"))
    page = sign_in(browser, server, token, viewport=PHONE)
    page.goto(f"{server}/submissions/{failed}")
    dump = page.locator("table.dump").first
    label = dump.locator("th").first.bounding_box()
    table = dump.bounding_box()
    assert label["width"] < 0.3 * table["width"], (label, table)  # not the checks' 50 %
    dump.evaluate("t => { t.closest('.scroll').scrollLeft = 10000; }")
    after = dump.locator("tbody th").first.bounding_box()
    box = dump.evaluate("t => t.closest('.scroll').getBoundingClientRect().left")
    assert abs(after["x"] - box) < 2, (after, box)  # the labels stay while values scroll
    shot(page, "phone-dump-scrolled")


def test_the_cli_progress_says_when_a_check_finished_not_how_long_it_took():
    line = progress_line(CheckResult("random_rows", True, "passed", 15.0, 15.0), 0.0)
    assert line.startswith("  PASS  random_rows  15/15  [done at ") and line.endswith(" s]")


def test_on_a_phone_the_lists_show_every_column_in_view(server, browser):  # noqa: F811
    """The instructor's list hid Verdict, Score, Flag and the actions in a scroll box, and the
    leaderboard cut Device and hid Late: on a phone each row is a card of labelled values."""
    from test_web_ui import ADMIN

    token = _api_students(server, "cards")["cards"]
    _api_graded(server, token, mutant_file("safe_softmax", "naive_unsafe_exp"))
    for who, path, table, labels in [
            (ADMIN, "/admin", "#submissions", ("Verdict", "Score", "Flag", "Actions")),
            (token, "/leaderboard/safe_softmax", "table.board", ("Score", "Device", "Late"))]:
        page = sign_in(browser, server, who, viewport=PHONE)
        page.goto(f"{server}{path}")
        row = page.locator(f"{table} tbody tr").first
        for label in labels:
            cell = row.locator(f"[data-label='{label}']")
            box = cell.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], \
                (path, label, box)
            assert cell.evaluate("c => getComputedStyle(c, '::before').content") == f'"{label}"'
        shot(page, f"phone-cards{path.replace('/', '-')}")


# a pane of the pair view: its rows (a line's number, or None for a gap), where each
# starts, and whether any of it is marked
PANE_ROWS = """pre => {
  const rows = []; let row = null;
  for (const node of pre.childNodes) {
    if (node.nodeType === 1 && node.classList.contains('ln')) {
      row = {n: node.textContent ? Number(node.textContent) : null,
             y: node.getBoundingClientRect().top, marked: false};
      rows.push(row);
    } else if (node.nodeType === 1 && node.tagName === 'MARK' && row) { row.marked = true; }
  }
  return {top: pre.getBoundingClientRect().top, rows};
}"""
# the copy's lines past line 30 are 3 further down: a comment and a blank line added
ADDED_AT, ADDED = 30, ["    # the copier added this comment,", "    # and a blank line under it",
                       ""]


def _line_tops(page, pane):
    """A pane's line tops by line number, measured against the pane's top, after checking
    that every row is one line of the same height (issue 42: a marked line of a file sent
    from the page was followed by a blank one)."""
    found = page.locator(f"#{pane}-source").evaluate(PANE_ROWS)
    numbered = [(k, r) for k, r in enumerate(found["rows"]) if r["n"] is not None]
    (k0, r0), (k1, r1) = numbered[0], numbered[-1]
    pitch = (r1["y"] - r0["y"]) / (k1 - k0)
    for k, r in numbered:  # row k starts k lines below row 0: no line takes two
        assert abs(r["y"] - (r0["y"] + (k - k0) * pitch)) < 1, (pane, r, k, pitch)
    tops = {r["n"]: r["y"] - found["top"] for _, r in numbered}
    marked = [r["n"] for _, r in numbered if r["marked"]]
    gaps = sum(r["n"] is None for r in found["rows"])
    return tops, marked, gaps, pitch


def _matching_lines_level(page):
    """Each marked line of the original sits level with the same line of the copy (3 lines
    further down past the comment the copier added), row for row in the two panes."""
    left, marked, left_gaps, left_pitch = _line_tops(page, "first")
    right, _, right_gaps, right_pitch = _line_tops(page, "second")
    assert abs(left_pitch - right_pitch) < 0.5, (left_pitch, right_pitch)  # one line height
    assert (left_gaps, right_gaps) == (len(ADDED), 0)  # the original faces the added lines
    assert len(marked) > 20, marked
    off = [(n, left[n], right[n + (len(ADDED) if n > ADDED_AT else 0)]) for n in marked]
    assert all(abs(a - b) < 1 for _, a, b in off), [o for o in off if abs(o[1] - o[2]) >= 1]


def test_the_similarity_report_and_a_pair_side_by_side_at_1366_and_390(server, browser):  # noqa: F811
    """Issue 30: the instructor computes the report, finds the copied pair, opens it side by
    side, flags both; the same pages on a phone fit its width, the two files one above the
    other. Issue 42: the original came from the page's form (its lines end in \\r\\n) and
    the copy has a comment added; matching lines stay level, each line one line high, in
    both schemes and at both widths."""
    import re

    import httpx
    from playwright.sync_api import expect
    from test_similarity import COPY, ORIGINAL
    from test_web_ui import ADMIN

    lines = COPY.split("\n")
    copy = "\n".join(lines[:ADDED_AT] + ADDED + lines[ADDED_AT:])
    tokens = _api_students(server, "simone", "simtwo")
    ids = []
    for name, source in (("simone", ORIGINAL.replace("\n", "\r\n")), ("simtwo", copy)):
        r = httpx.post(f"{server}/api/submissions", timeout=30,
                       headers={"Authorization": f"Bearer {tokens[name]}"},
                       json={"exercise": "safe_softmax", "language": "triton", "source": source})
        ids.append(r.json()["id"])
    laptop = {"width": 1366, "height": 900}
    page = sign_in(browser, server, ADMIN, viewport=laptop)
    page.goto(f"{server}/admin")
    page.locator("#similarity-links").get_by_role("link", name="safe_softmax").click()
    page.get_by_role("button", name=re.compile("^Compute")).click()
    for _ in range(240):
        if page.locator("#similarity-status").inner_text().startswith("Computed"):
            break
        page.wait_for_timeout(500)
        page.reload()
    row = page.locator(f"#pairs tr[data-a='{ids[0]}'][data-b='{ids[1]}']")
    assert "100 %" in row.locator("[data-label='Similarity']").inner_text()
    shot(page, "similarity-report-1366")
    row.get_by_role("link", name="side by side").click()
    # The click returns once the pair's URL commits, before its body is parsed: wait for it.
    page.wait_for_url(re.compile(r"/pair/\d+/\d+$"))
    page.wait_for_load_state()
    expect(page.locator("#first-source mark").first).to_be_attached()
    expect(page.locator("#second-source mark").first).to_be_attached()
    first, second = (page.locator(f"#{w}-source").bounding_box() for w in ("first", "second"))
    assert abs(first["y"] - second["y"]) < 2 and first["x"] < second["x"]  # side by side
    _matching_lines_level(page)
    # the flags in words (it said "now: 1 none, 2 none")
    expect(page.locator("#pair-flags")).to_have_text("Neither is flagged.")
    page.get_by_role("button", name="Flag both suspicious").click()
    expect(page.locator("[role=status]")).to_contain_text("now flagged suspicious")
    expect(page.locator("#pair-flags")).to_have_text("Both are flagged suspicious.")
    shot(page, "issue42-similarity-pair-1366-light")
    dark = sign_in(browser, server, ADMIN, viewport=laptop, color_scheme="dark")
    dark.goto(page.url)
    _matching_lines_level(dark)
    shot(dark, "issue42-similarity-pair-1366-dark")

    for scheme in ("light", "dark"):
        phone = sign_in(browser, server, ADMIN, viewport=PHONE, color_scheme=scheme)
        phone.goto(page.url)
        assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        first, second = (phone.locator(f"#{w}-source").bounding_box()
                         for w in ("first", "second"))
        assert second["y"] > first["y"] + first["height"] - 2  # one above the other
        assert first["x"] >= 0 and first["x"] + first["width"] <= PHONE["width"]
        # one above the other, row for row: a matching line as far down in either pane
        _matching_lines_level(phone)
        shot(phone, f"issue42-similarity-pair-390-{scheme}")
    phone.goto(f"{server}/admin/similarity/safe_softmax")
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    cell = phone.locator(f"#pairs tr[data-a='{ids[0]}'] [data-label='Similarity']")
    box = cell.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
    shot(phone, "similarity-report-390")
