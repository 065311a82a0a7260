"""Input checks shared by the API and the pages: every bad input is a 4xx with a reason.

Found by attacking the server (issue 12): a JSON body nested 5,000 deep raised
RecursionError, a lone surrogate (``"\\ud800"``) reached the database encoder, an id past
64 bits overflowed SQLite, and an unknown filter value raised in an enum. Each answered a
bare 500. Later, a NUL character, which PostgreSQL refuses in text.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, get_args

from fastapi import HTTPException, Path, Request

MAX_ID = 2**63 - 1  # the largest id a database integer column holds
MAX_JSON_DEPTH = 32  # no body of ours nests deeper than 4

DbId = Annotated[int, Path(ge=1, le=MAX_ID, description="an id (1 to 2**63 - 1)")]

# the graders' verdicts (graders/shared/vocabulary.py), as their JSON contract spells them
Verdict = Literal["passed", "failed", "rejected", "compile_error", "compiled", "runtime_error",
                  "timeout", "memory_limit", "output_limit", "grader_error"]
StatusName = Literal["queued", "running", "graded", "error"]
FlagName = Literal["none", "suspicious", "invalidated"]
VERDICTS = frozenset(get_args(Verdict))


def json_depth(text: bytes) -> int:
    """How deep arrays and objects nest, outside strings; a scan, not a parse."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in text:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def check_unicode(value: Any, where: str = "the body") -> Any:
    """Strings must be text a database can store: a lone surrogate is not, and neither is
    a NUL character (SQLite keeps it, PostgreSQL refuses it with an error)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise HTTPException(422, f"{where} holds a string that is not valid Unicode "
                                     "(a lone surrogate such as \\ud800)") from None
        if "\x00" in value:
            raise HTTPException(422, f"{where} holds a NUL character{nul_line(value)}")
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


def parse_json(raw: bytes) -> Any:
    """A JSON body, bounded in depth and checked for lone surrogates."""
    if json_depth(raw) > MAX_JSON_DEPTH:
        raise HTTPException(422, f"the JSON body nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise HTTPException(422, "the body is not valid JSON") from None
    return check_unicode(value)


async def read_json(request: Request) -> Any:
    return parse_json(await request.body())
