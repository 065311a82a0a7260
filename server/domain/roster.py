"""A course's roster: the students as a CSV names them, read as a spreadsheet saves it, and
CSV cells written so that a spreadsheet shows them as text."""

from __future__ import annotations

import csv
import io

from pydantic import BaseModel, Field, model_validator

from .models import USERNAME_PATTERN
from .validation import check_unicode


class StudentIn(BaseModel):
    username: str = Field(pattern=f"^{USERNAME_PATTERN}$")
    display_name: str = Field(min_length=1, max_length=128)


class Roster(BaseModel):
    students: list[StudentIn]

    @model_validator(mode="after")
    def _each_username_once(self):
        # twice in one roster would issue two tokens, and the first would be dead at once
        seen, twice = set(), set()
        for student in self.students:
            if student.username in seen:
                twice.add(student.username)
            seen.add(student.username)
        if twice:
            raise ValueError(f"a roster names each username once; twice: {', '.join(sorted(twice))}")
        return self


# How a roster file's bytes are read: UTF-8 (with Excel's byte-order mark or without), else
# Windows-1252, which is what Excel on Windows saves as plain "CSV". A file that is valid
# UTF-8 is never read as Windows-1252 (text in the one is almost never valid in the other).
UTF8, WINDOWS_1252 = "utf-8", "windows-1252"


def roster_text(data: bytes) -> tuple[str, str]:
    """The roster file's text and the encoding it was read in; ValueError says what to do
    with a file that is neither."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ValueError("the file is UTF-16 (Excel's \"Unicode Text\"): save it as \"CSV UTF-8 "
                         "(Comma delimited)\" and upload that")
    try:
        return data.decode("utf-8-sig"), UTF8
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252"), WINDOWS_1252
    except UnicodeDecodeError as exc:
        raise ValueError(f"the file is neither UTF-8 nor Windows-1252 text (byte {exc.start}): "
                         "save it as \"CSV UTF-8 (Comma delimited)\" and upload that") from None


def roster_from_csv(text: str) -> Roster:
    """A roster from CSV with the header row username,display_name; ValueError says why not
    (and, as for a JSON body, text a database cannot store is a 422)."""
    check_unicode(text, "the roster")
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows or not {"username", "display_name"} <= set(rows[0]):
        raise ValueError("the CSV needs a header row: username,display_name")
    return Roster(students=[{"username": (r["username"] or "").strip(),
                             "display_name": (r["display_name"] or "").strip()} for r in rows])


def csv_cell(text: str) -> str:
    """A spreadsheet runs a cell that starts with = + - @ as a formula: quote it."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


# Excel reads a CSV without a byte-order mark in the machine's own code page, so "Ångström"
# would open as "Ã…ngstrÃ¶m": every CSV the server writes starts with one.
BOM = "\ufeff"
