"""The key of a stratum, the cell items are sampled by (pure: no database)."""

from __future__ import annotations

from typing import NamedTuple


class StratumKey(NamedTuple):
    """A discipline × question type × sub-discipline cell."""

    discipline: str
    qtype: str
    subdiscipline: str
