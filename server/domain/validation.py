"""Input checks shared by the API and the pages: every bad input is a 4xx with a reason.
These are the rules; the HTTP layers answer their words with the status (server/api/deps.py).

Found by attacking the server (issue 12): a JSON body nested 5,000 deep raised
RecursionError, a lone surrogate (``"\\ud800"``) reached the database encoder, an id past
64 bits overflowed SQLite, and an unknown filter value raised in an enum. Each answered a
bare 500. Later, a NUL character, which PostgreSQL refuses in text.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

MAX_ID = 2**63 - 1  # the largest id a database integer column holds

# the graders' verdicts (graders/shared/vocabulary.py), as their JSON contract spells them
Verdict = Literal["passed", "failed", "rejected", "compile_error", "compiled", "runtime_error",
                  "timeout", "memory_limit", "output_limit", "grader_error"]
StatusName = Literal["queued", "running", "graded", "error"]
FlagName = Literal["none", "suspicious", "invalidated"]
VERDICTS = frozenset(get_args(Verdict))


class Unstorable(ValueError):
    """Text a database cannot store: answered 422, in these words."""


def check_unicode(value: Any, where: str = "the body") -> Any:
    """Strings must be text a database can store: a lone surrogate is not, and neither is
    a NUL character (SQLite keeps it, PostgreSQL refuses it with an error)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise Unstorable(f"{where} holds a string that is not valid Unicode "
                             "(a lone surrogate such as \\ud800)") from None
        if "\x00" in value:
            raise Unstorable(f"{where} holds a NUL character{nul_line(value)}")
    elif isinstance(value, dict):
        for k, v in value.items():
            check_unicode(k, where)
            check_unicode(v, f"{where}'s {k!r}" if where == "the body" else where)
    elif isinstance(value, list):
        for v in value:
            check_unicode(v, where)
    return value


def nul_line(text: str) -> str:
    """' (line N)' of the first NUL in a text of several lines, else ''."""
    if "\n" not in text:
        return ""
    line = text.count("\n", 0, text.index("\x00")) + 1
    return f" (line {line})"
