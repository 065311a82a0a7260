"""Issue 42, items 2, 3, 4 and 10: the exercise page's submit form in Chromium.

The form refuses, in the API's own words and before anything is stored or counted, what the
API refuses (a .txt, a notebook, a binary, an empty file); it says which of editor and file
it sends; the editor has a code editor's width at 1366 px; Tab leaves an editor the student
has not typed in; a successful submit's address carries no fragment."""

import re

import httpx
import pytest

from test_web_ui import _api_students, browser, server, shot, sign_in  # noqa: F401

from server.web.render import sentence

expect = pytest.importorskip("playwright.sync_api").expect

PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1366, "height": 900}

# what a student might pick in the file chooser instead of a kernel
NOT_SOURCE = [
    ("notes.txt", b"hello\n"),
    ("kernel.ipynb", b'{"cells": [{"cell_type": "code", "source": ["import triton"]}]}\n'),
    ("kernel.py", b"\x7fELF\x02\x01\x01\x00\xff\xfe\x00\x00"),  # a binary under a .py name
    ("empty.py", b""),
]


def _api_words(base, token, name, data) -> str:
    r = httpx.post(f"{base}/api/submissions", timeout=30,
                   headers={"Authorization": f"Bearer {token}"},
                   data={"exercise": "safe_softmax", "language": "triton"},
                   files={"file": (name, data)})
    assert r.status_code == 422, (name, r.status_code, r.text)
    return r.json()["detail"]


def _mine(base, token) -> list:
    return httpx.get(f"{base}/api/submissions", timeout=30,
                     headers={"Authorization": f"Bearer {token}"}).json()["submissions"]


@pytest.mark.parametrize("viewport, scheme", [(PHONE, "dark"), (PHONE, "light"),
                                              (LAPTOP, "light"), (LAPTOP, "dark")])
def test_the_form_refuses_what_the_api_refuses_and_stores_nothing(server, browser, viewport,  # noqa: F811
                                                                   scheme):
    who = f"uploads{viewport['width']}{scheme}"
    token = _api_students(server, who)[who]
    words = {name: _api_words(server, token, name, data) for name, data in NOT_SOURCE}
    assert "cannot tell the language of 'notes.txt'" in words["notes.txt"]
    assert "Jupyter notebook" in words["kernel.ipynb"] and ".py file" in words["kernel.ipynb"]
    assert "not UTF-8" in words["kernel.py"] and "empty" in words["empty.py"]

    page = sign_in(browser, server, token, viewport=viewport, color_scheme=scheme)
    for name, data in NOT_SOURCE:
        page.goto(f"{server}/exercises/safe_softmax")
        page.get_by_label("Your code").fill("# my own work, not to be lost\n")
        page.get_by_label("…or upload a file").set_input_files(
            {"name": name, "mimeType": "application/octet-stream", "buffer": data})
        # the form says which of the two it sends
        expect(page.locator("#file-chosen")).to_contain_text(
            f"Submit sends the file {name}, not the code in the editor")
        with page.expect_navigation():
            page.get_by_role("button", name="Submit for grading").click()
        error = page.locator("#submit-error")
        expect(error).to_have_text(sentence(words[name]))
        # the reason is on screen and focused; the editor still holds the student's code
        box = error.bounding_box()
        assert 0 <= box["y"] and box["y"] + box["height"] <= viewport["height"], (name, box)
        assert page.evaluate("document.activeElement.id") == "submit-error"
        assert page.get_by_label("Your code").input_value() == "# my own work, not to be lost\n"
        if name == "kernel.ipynb":
            shot(page, f"issue42-upload-refused-{viewport['width']}-{scheme}")
    assert _mine(server, token) == []  # nothing stored, so nothing counted


def test_a_chosen_file_can_be_put_back_for_the_editor(server, browser):  # noqa: F811
    token = _api_students(server, "chooser")["chooser"]
    page = sign_in(browser, server, token, viewport=PHONE)
    page.goto(f"{server}/exercises/safe_softmax")
    note = page.locator("#file-chosen")
    expect(note).to_be_hidden()
    page.get_by_label("…or upload a file").set_input_files(
        {"name": "mine.py", "mimeType": "text/x-python", "buffer": b"x = 1\n"})
    expect(note).to_be_visible()
    shot(page, "issue42-file-chosen-390")
    page.get_by_role("button", name="Send the editor's code instead").click()
    expect(note).to_be_hidden()
    assert page.get_by_label("…or upload a file").evaluate("f => f.files.length") == 0


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_editor_has_a_code_editors_width_at_1366(server, browser, scheme):  # noqa: F811
    token = _api_students(server, f"wide{scheme}")[f"wide{scheme}"]
    page = sign_in(browser, server, token, viewport=LAPTOP, color_scheme=scheme)
    for name in ("safe_softmax", "masked_softmax", "online_softmax"):
        page.goto(f"{server}/exercises/{name}")
        for language in ("triton", "hip"):
            page.get_by_label("Language").select_option(language)  # its skeleton, swapped in
            # the skeleton's longest line (89 to 96 columns) shows whole: nothing to scroll
            fits = page.get_by_label("Your code").evaluate(
                "a => [a.scrollWidth, a.clientWidth]")
            assert fits[0] <= fits[1], (name, language, fits)
        # every formula and code block of the statement shows whole
        cut = page.locator(".statement pre").evaluate_all(
            "ps => ps.filter(p => p.scrollWidth > p.clientWidth).map(p => p.textContent)")
        assert cut == [], (name, cut)
        # no empty card: the form's card ends where its form does
        card, form = (page.locator(s).bounding_box()
                      for s in (".card.submit", ".card.submit form"))
        assert card["y"] + card["height"] - (form["y"] + form["height"]) < 40, (card, form)
        assert page.evaluate("document.documentElement.scrollWidth") <= LAPTOP["width"]
        if name == "safe_softmax":
            page.locator(".card.submit").scroll_into_view_if_needed()
            shot(page, f"issue42-exercise-1366-{scheme}")
    page.set_viewport_size(PHONE)
    page.goto(f"{server}/exercises/safe_softmax")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shot(page, f"issue42-exercise-390-{scheme}")


def test_tab_leaves_the_editor_until_the_student_types_and_no_fragment_follows(  # noqa: F811
        server, browser):  # noqa: F811
    token = _api_students(server, "tabber")["tabber"]
    page = sign_in(browser, server, token, viewport=LAPTOP)
    page.goto(f"{server}/exercises/safe_softmax")
    # the way out is said before the editor, and read out with it
    order = page.evaluate("""() => {
        const help = document.getElementById('editor-help');
        const area = document.getElementById('source');
        return [help.compareDocumentPosition(area) & Node.DOCUMENT_POSITION_FOLLOWING,
                area.getAttribute('aria-describedby')]; }""")
    assert order[0] and "editor-help" in order[1], order
    assert "Esc, then Tab" in page.locator("#editor-help").inner_text()
    page.get_by_label("Language").focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "source"
    skeleton = page.get_by_label("Your code").input_value()
    page.keyboard.press("Tab")  # nothing typed yet: Tab moves on, the code untouched
    assert page.evaluate("document.activeElement.id") == "file"
    assert page.get_by_label("Your code").input_value() == skeleton
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement.id") == "source"
    page.keyboard.press("Control+A")
    page.keyboard.type("def softmax(x):\n")
    page.keyboard.press("Tab")  # typed: now Tab indents
    assert page.evaluate("document.activeElement.id") == "source"
    page.keyboard.type("return x\n")
    assert page.get_by_label("Your code").input_value() == "def softmax(x):\n    return x\n"
    page.keyboard.press("Escape")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "file"
    # a successful submit lands on its result's address, with no fragment (it was #submit-error)
    page.get_by_role("button", name="Submit for grading").click()
    page.wait_for_url(re.compile(r"/submissions/\d+"))
    assert re.fullmatch(rf"{re.escape(server)}/submissions/\d+", page.url), page.url
