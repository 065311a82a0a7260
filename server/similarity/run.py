"""A similarity run, in a process of its own: ``python -m server.similarity.run``, with its
job as one JSON line on stdin (the report's id, the database URL, each language's skeleton).

copydetect (a winnowing detector in the manner of MOSS) fingerprints, for each student and
language, their best submission (highest score, the later of equal ones) and their latest:
the code is tokenized and its names replaced, so that renaming variables changes nothing,
and the fingerprints of the exercise's skeleton are boilerplate, left out of every match.
Every pair of students in one language is compared, each of one's files against each of the
other's; a pair's similarity is its most similar two files, each two scored by the larger of
their two shares of matched tokens (a copy inside a longer file still shows). The pairs at or
above ``FLOOR`` are stored, most similar first, with the character spans that match in each
source, and the report is marked done.

It runs apart from the server because copydetect brings numpy and matplotlib, which the
server's process never imports (tests/test_import_graph.py), and so that a run over a large
class takes no time from the API's threads.
"""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass
from itertools import combinations

from sqlalchemy import func, select

from ..core.clock import utcnow
from ..core.db import make_engine, make_sessionmaker
from ..domain.models import SimilarityReport, Submission, User
from .constants import FLOOR

K = 25  # tokens in a fingerprinted k-gram (copydetect's default noise threshold)
WINDOW = 6  # winnowing window: a match of K + WINDOW - 1 = 30 tokens is always seen

MAX_PAIRS = 300
SUFFIX = {"triton": ".py", "hip": ".cpp"}  # the tokenizer is chosen by the file's suffix


@dataclass(frozen=True)
class Source:
    submission_id: int
    user: str
    language: str
    text: str


def fingerprint(text: str, language: str, boilerplate=None):
    from copydetect import CodeFingerprint

    return CodeFingerprint(f"submission{SUFFIX.get(language, '.py')}", K, WINDOW,
                           boilerplate=boilerplate, fp=io.StringIO(text))


def compare(sources: list[Source], skeletons: dict[str, str]) -> list[dict]:
    """Every pair of different students in one language, at or above FLOOR, most similar
    first; each with the matched spans (character offsets) in both sources."""
    from copydetect import compare_files

    boilerplate = {language: list(fingerprint(text, language).hashes)
                   for language, text in skeletons.items() if text}
    prints = {s.submission_id: fingerprint(s.text, s.language, boilerplate.get(s.language))
              for s in sources}
    best: dict[tuple[str, str, str], dict] = {}  # (user, user, language) -> its closest files
    for a, b in combinations(sources, 2):
        if a.language != b.language or a.user == b.user:
            continue
        if a.user > b.user:
            a, b = b, a
        _, (share_a, share_b), (spans_a, spans_b) = compare_files(prints[a.submission_id],
                                                                  prints[b.submission_id])
        similarity = float(max(share_a, share_b))
        key = (a.user, b.user, a.language)
        if similarity < FLOOR or similarity <= best.get(key, {}).get("similarity", -1.0):
            continue
        best[key] = {"a": a.submission_id, "b": b.submission_id,
                     "a_user": a.user, "b_user": b.user, "language": a.language,
                     "similarity": round(similarity, 4), "a_share": round(float(share_a), 4),
                     "b_share": round(float(share_b), 4),
                     "a_spans": _spans(spans_a, a.text), "b_spans": _spans(spans_b, b.text)}
    pairs = sorted(best.values(), key=lambda p: (-p["similarity"], p["a"], p["b"]))
    return pairs[:MAX_PAIRS]


def _spans(slices, text: str) -> list[list[int]]:
    """copydetect's 2×N (starts, ends) array as [[start, end], ...] of plain ints, each
    widened to whole words: its offsets can fall inside one ("@t|riton.jit", "re|turn"),
    and a mark that cuts a name in two reads as a bug in the view."""
    if len(slices) != 2 or len(slices[0]) == 0:
        return []
    widened = sorted(_whole_words(text, int(s), int(e)) for s, e in zip(slices[0], slices[1]))
    merged: list[list[int]] = []
    for start, end in widened:  # widening can make two spans meet: one mark, not two
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def _whole_words(text: str, start: int, end: int) -> tuple[int, int]:
    def inside(i: int) -> bool:  # text[i - 1] and text[i] are parts of one word
        return 0 < i < len(text) and _word(text[i - 1]) and _word(text[i])

    start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
    while inside(start):
        start -= 1
    while inside(end):
        end += 1
    return start, end


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def candidate_sources(db, exercise: str) -> list[Source]:
    """Each student's best submission per language for ``exercise`` (the highest score, the
    later of equal ones) and their latest; one file when those are the same."""
    latest = (select(func.max(Submission.id)).where(Submission.exercise == exercise)
              .group_by(Submission.user_id, Submission.language))
    ranked = (select(Submission.id, func.row_number().over(
        partition_by=(Submission.user_id, Submission.language),
        order_by=(Submission.score.desc(), Submission.id.desc())).label("rank"))
        .where(Submission.exercise == exercise, Submission.score.is_not(None)).subquery())
    best = select(ranked.c.id).where(ranked.c.rank == 1)
    rows = db.execute(select(Submission, User.username).join(User, User.id == Submission.user_id)
                      .where(Submission.id.in_(latest) | Submission.id.in_(best))
                      .order_by(Submission.id)).all()
    return [Source(s.id, username, s.language, s.source) for s, username in rows]


def run(job: dict) -> None:
    engine = make_engine(job["database_url"])
    Session = make_sessionmaker(engine)
    with Session() as db:
        report = db.get(SimilarityReport, int(job["report_id"]))
        if report is None:
            return
        try:
            sources = candidate_sources(db, report.exercise)
            report.pairs = compare(sources, job.get("skeletons") or {})
            report.submissions = len(sources)
            report.status = "done"
        except Exception as exc:  # noqa: BLE001 - the report says what went wrong
            report.status, report.message = "error", f"{type(exc).__name__}: {exc}"[:500]
        report.finished_at = utcnow()
        db.commit()
    engine.dispose()


if __name__ == "__main__":  # pragma: no cover - started by server/similarity/reports.py
    run(json.loads(sys.stdin.readline()))
