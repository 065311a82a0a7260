"""The result page (issue 42), in Chromium at 390 and 1366 px, light and dark.

A result that comes in takes the focus for screen readers without a 3 px orange ring round
the verdict (it read as an error on a pass). A `rejected` run names the check that found
it ("rejected here"), not "not run" for every check, and says where it was graded in the
words a compile error uses. On a phone a row dump wider than its box shows that it
scrolls, and the checks' names break only after an underscore, never inside a word.
"""

import io
import re

import pytest
from conftest import REPO, mutant_file
from test_web_ui import _api_graded, _api_students, browser, server, shot, sign_in  # noqa: F401

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1366, "height": 900}
TORCH_SHORTCUT = REPO / "reference_solutions/safe_softmax/from_scratch/torch_softmax_inside.py"

# every place a check's name breaks onto a new line, and the character before it: only
# "_" may be (half_precision_|overflow, not half_precision_ove|rflow)
NAME_BREAKS = """() => [...document.querySelectorAll('table.checks > tbody > tr > th[scope=row]')]
  .map(th => {
    const breaks = []; let top = null, prev = '';
    const walk = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    for (let node; (node = walk.nextNode());) {
      for (let i = 0; i < node.length; i++) {
        const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1);
        const y = r.getBoundingClientRect().top;
        if (top !== null && y > top + 2) breaks.push(prev + '|' + node.data[i]);
        top = y; prev = node.data[i];
      }
    }
    return {name: th.textContent, breaks};
  })"""


@pytest.fixture(scope="module")
def student(server):  # noqa: F811 - test_web_ui's fixture
    """A student with a failed submission (row dumps) and one that does not parse (no
    runner starts, so no device is named): the rejected one comes through the page."""
    token = _api_students(server, "resulting")["resulting"]
    failed = _api_graded(server, token, mutant_file("safe_softmax", "naive_unsafe_exp"))
    broken = _api_graded(server, token, REPO / "tests" / "fixtures" / "syntax_error.py")
    return token, failed, broken


def _names_break_at_underscores(page):
    names = page.evaluate(NAME_BREAKS)
    assert len(names) == 8, names
    wrong = [n for n in names if any(not b.startswith("_|") for b in n["breaks"])]
    assert not wrong, wrong
    return [n["name"] for n in names if n["breaks"]]


def _graded_on(page) -> str:
    return page.locator(".verdict p.meta").inner_text()


def test_a_result_comes_in_focused_without_a_ring_and_a_rejection_names_its_check(
        server, browser, student):  # noqa: F811
    token, _, broken = student
    page = sign_in(browser, server, token, viewport=LAPTOP)
    page.goto(f"{server}/exercises/safe_softmax")
    # a warm runner rejects it within 0.1 s, before the page could wait for it: two
    # seconds at import, so that the result comes in to the page (poll.js)
    page.locator("#source").fill("import time\ntime.sleep(2)\n" + TORCH_SHORTCUT.read_text())
    page.get_by_role("button", name="Submit for grading").click()
    page.wait_for_url(f"{server}/submissions/*")
    expect(page.locator("#status")).to_be_attached()  # pending: poll.js brings the result
    expect(page.locator("#verdict")).to_have_text("rejected", timeout=180_000)
    expect(page.locator("#announce")).to_have_text(re.compile("^Graded: rejected"))
    # the focus moved to the verdict (for screen readers), with no ring round it
    assert page.evaluate("document.activeElement.id") == "verdict-h"
    ring = page.locator("#verdict-h").evaluate(
        "h => { const s = getComputedStyle(h); return [s.outlineStyle, s.outlineWidth]; }")
    assert ring[0] == "none" or ring[1] == "0px", ring
    # the check the message names is the one that found it; the others were not run
    message = page.locator(".verdict pre.message").inner_text()
    named = re.search(r"in check (\w+)", message).group(1)
    stopped = page.locator("table.checks tr.stopped")
    expect(stopped).to_have_count(1)
    expect(stopped.locator("th")).to_have_text(named)
    expect(stopped.locator("td").first).to_have_text("rejected here")
    expect(page.locator("table.checks tr.unrun")).to_have_count(7)
    # where it was graded, in the words a compile error's page uses (no runner named one)
    assert _graded_on(page).startswith("graded on the CPU (Triton interpreter)"), \
        _graded_on(page)
    shot(page, "issue42-result-rejected-1366-light")
    url = page.url
    page.goto(f"{server}/submissions/{broken}")
    expect(page.locator("#verdict")).to_have_text("compile_error")
    assert _graded_on(page) == "graded on the CPU"

    for width, scheme in ((1366, "dark"), (390, "light"), (390, "dark")):
        other = sign_in(browser, server, token, viewport={"width": width, "height": 844},
                        color_scheme=scheme)
        other.goto(url)
        expect(other.locator("table.checks tr.stopped th")).to_have_text(named)
        wrapped = _names_break_at_underscores(other)
        if width == 390:
            assert "half_precision_overflow" in wrapped, wrapped  # it does wrap, at "_"
        shot(other, f"issue42-result-rejected-{width}-{scheme}")
        other.context.close()


def _edge(png: bytes, y: int) -> tuple[float, float]:
    """How far the box's rightmost pixels on row y differ from the page 40 px to their left."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("L")
    w = image.width
    return image.getpixel((w - 3, y)), image.getpixel((w - 40, y))


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_on_a_phone_a_dump_shows_it_scrolls_and_names_break_at_underscores(
        server, browser, student, scheme):  # noqa: F811
    token, failed, _ = student
    page = sign_in(browser, server, token, viewport=PHONE, color_scheme=scheme)
    page.goto(f"{server}/submissions/{failed}")
    expect(page.locator("#verdict")).to_have_text("failed")
    box = page.locator(".dump-box").first
    sizes = box.evaluate("b => [b.scrollWidth, b.clientWidth]")
    assert sizes[0] > sizes[1] + 40, sizes  # columns hide off to the right here
    # the caption's row has no text at the right: a shadow there says more is to the right,
    # and scrolled to the end it is gone
    caption = box.locator("caption").bounding_box()
    y = int(caption["y"] + caption["height"] / 2 - box.bounding_box()["y"])
    edge, inside = _edge(box.screenshot(), y)
    assert abs(edge - inside) > 25, (edge, inside)
    box.evaluate("b => { b.scrollLeft = b.scrollWidth; }")
    edge, inside = _edge(box.screenshot(), y)
    assert abs(edge - inside) < 6, (edge, inside)
    box.evaluate("b => { b.scrollLeft = 0; }")
    assert "half_precision_overflow" in _names_break_at_underscores(page)
    shot(page, f"issue42-result-dump-390-{scheme}")


def test_the_check_a_run_stopped_in_is_named_in_the_json():
    """The graders' side of item 9, without a grading: the check whose call ended the run is
    listed as the one that found it (`stopped`), still `ran: false` for the formats that
    count the checks that ran (JUnit, GitHub, Gradescope); the others as not run."""
    from graders.engine.outcome import mark_unrun
    from graders.engine.results import GradeResult
    from graders.engine.spec import CheckSpec
    from graders.shared.vocabulary import Verdict

    checks = [CheckSpec(name, 10.0, "", {}, {}) for name in ("first", "second", "third")]
    result = GradeResult("safe_softmax", "triton", "cpu", Verdict.REJECTED, 0.0, line=22)
    mark_unrun(result, checks, "second")
    found = [c.to_json() for c in result.checks]
    assert [c["name"] for c in found] == ["first", "second", "third"]
    assert found[1]["stopped"] is True and found[1]["ran"] is False and found[1]["line"] == 22
    assert all("stopped" not in c and c["message"] == "not run: rejected"
               for c in (found[0], found[2]))
