"""A long list's sorting and paging, read from its query string (``?sort=&order=&page=&size=``)
and written back into its links, so that it works without JavaScript. A value the page does
not know is never a 500: the list falls back to its default and the page says what it did
(and answers 422); a page past the last shows the last."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlencode

from ..domain.class_view import PAGE_SIZES

DEFAULT_SIZE = 50
MAX_PAGE_DIGITS = 7  # a page number longer than this is no page of ours


@dataclass(frozen=True)
class Listing:
    path: str
    sorts: dict[str, str]  # sort -> the order it starts in
    sort: str
    order: str
    page: int = 1
    size: int = DEFAULT_SIZE
    kept: dict[str, str] = field(default_factory=dict)  # the page's filters, kept in links

    def link(self, **changes) -> str:
        """This list's address with ``changes`` (a new sort or filter starts at page 1)."""
        state = replace(self, **changes)
        query = {k: v for k, v in state.kept.items() if v}
        query.update(sort=state.sort, order=state.order, size=str(state.size))
        if state.page > 1:
            query["page"] = str(state.page)
        return f"{self.path}?{urlencode(query)}"

    def sort_link(self, sort: str) -> str:
        """Sorted by ``sort``: the other way round when it is already; page 1."""
        if sort == self.sort:
            order = "desc" if self.order == "asc" else "asc"
        else:
            order = self.sorts[sort]
        return self.link(sort=sort, order=order, page=1)

    def aria_sort(self, sort: str) -> str:
        if sort != self.sort:
            return "none"
        return "ascending" if self.order == "asc" else "descending"

    def at(self, page: int) -> Listing:
        """The list at the page it showed (one asked for past the last showed the last)."""
        return replace(self, page=page)

    @property
    def hidden(self) -> dict[str, str]:
        """What a form of the page's filters sends again beside them (it starts at page 1)."""
        return {"sort": self.sort, "order": self.order, "size": str(self.size)}


def read_listing(query: Mapping[str, str], path: str, sorts: dict[str, str], default: str,
                 kept: dict[str, str] | None = None) -> tuple[Listing, list[str]]:
    """The list as the query string asks for it, and what it asked for that it cannot have
    (sentences the page shows; the list uses its defaults there)."""
    refused = []
    sort = query.get("sort") or default
    if sort not in sorts:
        refused.append(f"There is no sort {sort[:40]!r}: sorted by {default}.")
        sort = default
    order = query.get("order") or sorts[sort]
    if order not in ("asc", "desc"):
        refused.append(f"The order is asc or desc, not {order[:20]!r}.")
        order = sorts[sort]
    page_text = query.get("page") or "1"
    page = _number(page_text, MAX_PAGE_DIGITS)
    if page < 1:
        refused.append(f"There is no page {page_text[:20]!r}: this is page 1.")
        page = 1
    size_text = query.get("size") or str(DEFAULT_SIZE)
    size = _number(size_text, 4)
    if size not in PAGE_SIZES:
        refused.append(f"A page holds {', '.join(map(str, PAGE_SIZES[:-1]))} or "
                       f"{PAGE_SIZES[-1]} rows, not {size_text[:20]!r}: it holds "
                       f"{DEFAULT_SIZE}.")
        size = DEFAULT_SIZE
    return Listing(path, sorts, sort, order, page, size, dict(kept or {})), refused


def _number(text: str, digits: int) -> int:
    """A positive number written in ASCII digits, or 0 ("²".isdigit() is true, too)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= digits else 0
