"""A submitted file's name: stored without what no file name needs, sent as any browser reads it.

A name is the student's text. Control characters (CR and LF among them) are dropped when it
is stored: in a header they end it, and h11 drops the connection rather than send one. A
download names the file the RFC 6266 way: ``filename="…"`` in ASCII for old clients, and
``filename*=UTF-8''…`` (RFC 5987) with the name as it was, so "解答.py" stays "解答.py"
(header values are Latin-1: sent raw it was a 400).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePath
from urllib.parse import quote

MAX_NAME = 128
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NOT_PLAIN_ASCII = re.compile(r'[^A-Za-z0-9._ ()+,=@~-]')


def stored_name(filename: str, default: str = "submission") -> str:
    """The name kept for a submission: its last path part, no control characters."""
    name = PurePath(_CONTROL.sub("", filename)).name.strip()
    return name[:MAX_NAME] or default


def attachment(filename: str) -> str:
    """A Content-Disposition value that downloads ``filename`` under that name."""
    name = stored_name(filename, "download")
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    fallback = _NOT_PLAIN_ASCII.sub("_", ascii_name).strip() or "download"
    if fallback == name:
        return f'attachment; filename="{name}"'
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"
