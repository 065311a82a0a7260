"""How a page is written: Jinja2 templates from frontend/ (no CDN, little JS), markdown,
times and deadlines in words, scores and runs in a line, the GB/s chart, sentences; and
``render``, which every page router answers with (each form on it carries its CSRF token)."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from markdown_it import MarkdownIt
from markupsafe import Markup, escape

from graders.shared.vocabulary import Verdict

from ..auth import csrf, readers
from ..core.clock import as_utc
from ..core.settings import REPO_ROOT
from ..domain.formatting import NOT_SCORED, iso, readable
from ..domain.models import User

FRONTEND = REPO_ROOT / "frontend"
templates = Jinja2Templates(directory=FRONTEND / "templates")
_markdown = MarkdownIt("commonmark", {"html": False}).enable("table")
# the docs the pages serve (/help/<name>): a statement links them by their path in the
# repository (../../docs/benchmarks.md, which works on GitHub too), and the page by /help/
DOCS = {"student-ci": ("student-ci.md", "Grade your kernels on every push"),
        "benchmarks": ("benchmarks.md", "Benchmarks"),
        "lti": ("lti.md", "Add the autograder to your LMS (LTI 1.3)")}
_DOC_LINK = re.compile(r'href="(?:\.\./)*docs/([a-z-]+)\.md"')


# markdown-it writes a table column's alignment as a style attribute, which the pages'
# Content-Security-Policy refuses (server/core/security_headers.py): a class instead
# (frontend/static/style.css). Only markdown-it's own attributes match: with raw HTML off,
# a quote the text itself holds is written &quot;
_ALIGNED = re.compile(r'style="text-align:(left|center|right)"')


def _render_markdown(text: str) -> Markup:
    """Markdown to HTML (no raw HTML through), with links to a served doc made /help/ links
    and table alignment as classes."""
    html = _ALIGNED.sub(r'class="align-\1"', _markdown.render(text))
    return Markup(_DOC_LINK.sub(lambda m: f'href="/help/{m.group(1)}"' if m.group(1) in DOCS
                                else m.group(0), html))


templates.env.filters["markdown"] = _render_markdown
templates.env.filters["iso"] = iso


def _when(value: datetime | None) -> Markup:
    """A time people read (UTC, to the second) in a <time> that machines read."""
    if value is None:
        return Markup("")
    return Markup('<time datetime="{}">{}</time>').format(iso(value), readable(value))


def _in_words(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n > 1 else ''}"
    return "less than a minute"


def _due(deadline: datetime) -> Markup:
    """"… (in 3 days)", or "… (passed 2 hours ago)": a past deadline must not read like a
    future one."""
    left = (as_utc(deadline) - datetime.now(timezone.utc)).total_seconds()
    if left >= 0:
        return Markup("{} (in {})").format(_when(deadline), _in_words(left))
    return Markup('{} <strong class="late">(passed {} ago)</strong>').format(
        _when(deadline), _in_words(-left))


# why a verdict gives no score, said where its score would be (server/domain/formatting.py's NOT_SCORED)
NOT_SCORED_WHY = {Verdict.COMPILED.value: "HIP is graded on a GPU, and this server graded it "
                                          "on the CPU, so the file was only compiled; nothing "
                                          "was run or scored"}
assert set(NOT_SCORED_WHY) == NOT_SCORED


def _score_text(verdict: str | None, score: float | None) -> str:
    """A submission's score in a list: blank before it has one, and "not scored here" for
    a verdict that gives none (never a 0 that nobody earned)."""
    if verdict in NOT_SCORED:
        return "not scored here"
    return "" if score is None else f"{score:g}"


# where a result was graded, when its grader named no device (no runner started: a file
# that does not parse)
DEVICE_WORDS = {"cpu": "graded on the CPU", "cuda": "graded on a GPU"}


def _graded_on(result: dict) -> str:
    """Where a result was graded, in one phrase whether or not a runner named its device
    (issue 42: "graded on the CPU" beside "CPU (Triton interpreter)" for the same CPU)."""
    device, name = result.get("device") or "", result.get("device_name") or ""
    if not name:
        return DEVICE_WORDS.get(device, device)
    if result.get("verdict") in NOT_SCORED:  # "no GPU: NVRTC compile only"
        return name
    # the runner's words: "CPU (Triton interpreter)", or the GPU's name
    return f"graded on the {name}" if name.startswith("CPU") else f"graded on {name}"


def _run_summary(result: dict) -> str:
    """The line under a verdict: where it was graded, and for how long when anything ran.
    A file that did not compile ran nothing ("cpu · 0.0 s" said nothing true)."""
    parts = [_graded_on(result)]
    ran = result.get("verdict") in NOT_SCORED or any(
        c.get("ran", True) or c.get("stopped") for c in result.get("checks") or [])
    seconds = result.get("duration_s") or 0
    if ran and seconds >= 0.05:
        parts.append(f"{seconds:.1f}\u00a0s")  # a number never parted from its unit
    return " · ".join(p for p in parts if p)


templates.env.filters["when"] = _when
templates.env.filters["due"] = _due
templates.env.tests["nonfinite"] = lambda v: isinstance(v, str)  # dumps write NaN/inf as text


def _breakable(name: str) -> Markup:
    """A check's name that a narrow column breaks only after an underscore
    (half_precision_|overflow), never inside a word (issue 42: half_precision_ove|rflow)."""
    return Markup("_<wbr>").join(escape(part) for part in str(name).split("_"))


templates.env.filters["breakable"] = _breakable
templates.env.globals.update(score_text=_score_text, run_summary=_run_summary,
                             not_scored_why=NOT_SCORED_WHY)


def render(request: Request, name: str, user: User | readers.Reader | None,
           status_code: int = 200,
           **context: Any) -> HTMLResponse:
    token, new_seed = csrf.form_token(request)  # every form on the page carries it
    response = templates.TemplateResponse(request, name, {"user": user, "csrf": token,
                                                          **context}, status_code=status_code)
    csrf.set_seed(response, request, new_seed)
    return response


def sentence(text: str) -> str:
    """The API's reasons are clauses ("the source is empty"); a page writes sentences. A
    first word that is a name ("safe_softmax accepts …") keeps its case."""
    first = text.split(" ", 1)[0]
    if first.isalpha() and first.islower():
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


# -- the GB/s chart of a GPU result --------------------------------------------------------

def _said(label: str, diagnosis: dict) -> dict:
    """One shape's speed words: the time in the traffic table's terms, the compiled
    kernels' facts and the warnings with their fixes (old results have only the first)."""
    text = diagnosis.get("text")
    return {"label": label, "text": text if isinstance(text, str) else "",
            "kernels": [k["text"] for k in diagnosis.get("kernels") or []
                        if isinstance(k, dict) and isinstance(k.get("text"), str)],
            # a kernel's name is written `name`: split there, so the page sets it as code
            "warnings": [w.split("`") for w in diagnosis.get("warnings") or []
                         if isinstance(w, str)]}


def chart(result: dict | None) -> dict | None:
    """Bars of GB/s per graded shape beside the copy ceiling, as SVG coordinates."""
    shapes = ((result or {}).get("performance") or {}).get("shapes") or []
    if not shapes:
        return None
    top = max(max(s.get("copy_gbs") or 0, s.get("gbs") or 0) for s in shapes) or 1
    # 800 wide: the label after the longest bar (x = 596) needs about 190 more
    bars, said, width, height = [], [], 800, 28 * len(shapes) * 2 + 40
    for i, s in enumerate(shapes):
        y = 20 + i * 56
        label = f"{s.get('rows')}×{s.get('cols')} {s.get('dtype')}"
        # what each shape's time says (graders/engine/performance.py words it; old results
        # have none)
        if isinstance(s.get("diagnosis"), dict) and s["diagnosis"]:
            said.append(_said(label, s["diagnosis"]))
        bars.append({"y": y, "label": label,
                     "copy_w": 420 * (s.get("copy_gbs") or 0) / top,
                     "got_w": 420 * (s.get("gbs") or 0) / top,
                     "copy": s.get("copy_gbs"), "gbs": s.get("gbs"),
                     "fraction": s.get("fraction")})
    return {"bars": bars, "width": width, "height": height, "said": said}
