"""Pages of a table: which rows to read, and the links to the neighbouring pages."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from starlette.datastructures import QueryParams

PER_PAGE = 50
MAX_PAGE = 100_000


@dataclass(frozen=True, slots=True)
class Pager:
    """Page ``page`` (1-based) of ``per_page`` rows, under the filters of ``query``."""

    page: int
    per_page: int
    query: QueryParams

    @classmethod
    def of(cls, query: QueryParams, per_page: int = PER_PAGE) -> Pager:
        """The page a request asks for (``?page=N``; anything unreadable is page 1)."""
        raw = query.get("page", "1")
        page = int(raw) if raw.isdigit() else 1
        return cls(page=min(max(page, 1), MAX_PAGE), per_page=per_page, query=query)

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page

    def link(self, page: int) -> str:
        """``?...`` for page ``page`` with the same filters."""
        params = [(k, v) for k, v in self.query.multi_items() if k != "page"]
        return "?" + urlencode([*params, ("page", str(page))])

    def previous(self) -> str | None:
        return self.link(self.page - 1) if self.page > 1 else None

    def next(self, rows_on_page: int) -> str | None:
        """The next page's link if this page is full (there may be more)."""
        return self.link(self.page + 1) if rows_on_page >= self.per_page else None
