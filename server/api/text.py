"""Text accepted from clients: PostgreSQL cannot store NUL, so it is refused up front (422)
on every backend alike, as the bank importer does for items."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain the NUL character (\\x00)")
    return value


CleanText = Annotated[str, AfterValidator(_no_nul)]
