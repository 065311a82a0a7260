"""Every page readable in both colour schemes, on a phone and on a laptop (WCAG AA).

Each page the student and the instructor see is opened at 390 and 1366 px in light and in
dark, and every piece of visible text is measured against what is really behind it (the
first opaque background up the tree, with translucent ones blended in): 4.5:1 for text,
3:1 for large text (24 px, or 18.66 px bold). The keyboard focus ring (a non-text indicator)
needs 3:1 against the page. Issue 25 found white text on light fills in dark mode (2.14:1 on
every button, 1.92:1 on the "passed" badge) and source line numbers at 2.34:1.
"""

import pytest

from conftest import REPO, mutant_file
from test_web_ui import ADMIN, _api_graded, _api_students, browser, server, shot, sign_in  # noqa: F401

# colour arithmetic shared by the measurements below (WCAG 2's relative luminance)
COLOURS = """
  const parse = (c) => {
    const m = c.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(',').map(parseFloat);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const lum = ({r, g, b}) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const ratio = (x, y) => { const a = lum(x), b = lum(y); return (Math.max(a, b) + .05) / (Math.min(a, b) + .05); };
  const over = (top, under) => ({r: top.r * top.a + under.r * (1 - top.a),
                                 g: top.g * top.a + under.g * (1 - top.a),
                                 b: top.b * top.a + under.b * (1 - top.a), a: 1});
  const canvas = parse(getComputedStyle(document.documentElement).backgroundColor);
  // what is really behind an element: the first opaque background up the tree, with the
  // translucent ones on the way blended over it
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
    }
    let bg = canvas && canvas.a >= 1 ? canvas
      : (matchMedia('(prefers-color-scheme: dark)').matches ? {r: 0, g: 0, b: 0, a: 1} : {r: 255, g: 255, b: 255, a: 1});
    for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg);
    return bg;
  };
"""

# every visible text node's colour against its real background, below its AA threshold
CONTRAST = "() => {" + COLOURS + """
  const low = [];
  const seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const text = walker.currentNode.textContent.trim();
    const el = walker.currentNode.parentElement;
    if (!text || seen.has(el)) continue;
    seen.add(el);
    if (el.closest('svg, option, script, style, .visually-hidden, .skip')) continue;
    const style = getComputedStyle(el);
    const box = el.getBoundingClientRect();
    if (style.visibility !== 'visible' || box.width === 0 || box.height === 0) continue;
    const bg = background(el);
    const fg = over(parse(style.color), bg);
    const size = parseFloat(style.fontSize), bold = parseInt(style.fontWeight) >= 700;
    const need = (size >= 24 || (bold && size >= 18.66)) ? 3 : 4.5;
    const got = ratio(fg, bg);
    if (got < need - 0.005)
      low.push(`${el.tagName.toLowerCase()}${el.className ? '.' + el.className : ''} "${text.slice(0, 32)}": ${got.toFixed(2)} < ${need}`);
  }
  return low;
}"""

# the focused element's ring (the editor's box, for its textarea) against what is around it
FOCUS_RING = "() => {" + COLOURS + """
  const el = document.activeElement;
  const ring = el.closest('.editor') || el;
  const style = getComputedStyle(ring);
  const around = background(ring.parentElement);
  return {tag: el.tagName, id: el.id, width: parseFloat(style.outlineWidth),
          style: style.outlineStyle, ratio: ratio(over(parse(style.outlineColor), around), around)};
}"""


@pytest.fixture(scope="module")
def pages(server):  # noqa: F811 - test_web_ui's fixture
    """Every kind of page, with a submission of each kind to show."""
    base = server
    token = _api_students(base, "contrast")["contrast"]
    passed = _api_graded(base, token, REPO / "reference_solutions/safe_softmax/solution.py")
    failed = _api_graded(base, token, mutant_file("safe_softmax", "naive_unsafe_exp"))
    broken = _api_graded(base, token, REPO / "tests" / "fixtures" / "syntax_error.py")
    student = ["/signin", "/exercises", "/exercises/safe_softmax", "/exercises/online_softmax",
               f"/submissions/{passed}", f"/submissions/{failed}", f"/submissions/{broken}",
               "/me", f"/me/diff?a={passed}&b={failed}", f"/submissions/{failed}/source",
               "/leaderboard", "/leaderboard/safe_softmax", "/help/student-ci", "/help/benchmarks",
               "/no-such-page"]
    teacher = ["/admin", f"/admin/source/{failed}"]
    return token, student, teacher


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [390, 1366])
def test_every_page_has_aa_contrast(server, browser, pages, scheme, width):  # noqa: F811
    base = server
    token, student_pages, teacher_pages = pages
    low = {}
    for who, paths in ((token, student_pages), (ADMIN, teacher_pages)):
        page = sign_in(browser, base, who, {"width": width, "height": 844}, scheme)
        for path in paths:
            page.goto(f"{base}{path}")
            found = page.evaluate(CONTRAST)
            shot(page, f"contrast-{scheme}-{width}{path.replace('/', '-').replace('?', '-')}")
            if found:
                low[path] = found[:6]
        page.context.close()
    assert low == {}, "\n".join(f"{p}:\n  " + "\n  ".join(f) for p, f in low.items())


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_focus_ring_shows_in_both_schemes_and_around_the_editor(server, browser, pages,
                                                                     scheme):  # noqa: F811
    token = pages[0]
    context = browser.new_context(color_scheme=scheme)
    page = context.new_page()
    page.goto(f"{server}/signin")
    page.get_by_label("Your token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{server}/exercises")
    page.goto(f"{server}/exercises/safe_softmax")
    rings = []
    for _ in range(40):
        page.keyboard.press("Tab")
        ring = page.evaluate(FOCUS_RING)
        rings.append(ring)
        if ring["tag"] == "TEXTAREA":
            break
    assert rings[-1]["tag"] == "TEXTAREA", rings
    for ring in rings:
        assert ring["style"] != "none" and ring["width"] >= 2, ring
        assert ring["ratio"] >= 3, ring
    # the editor's ring is not clipped to a line: its box shows it whole
    page.keyboard.type("x")
    shot(page, f"focus-editor-{scheme}")
    context.close()
