"""What each item of a response matrix is: its discipline, question type and
sub-discipline, and the strata (groups of items) a health report is broken down by."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from bank.health.responses import BoolArray


class Breakdown(StrEnum):
    """How a report groups items into strata."""

    DISCIPLINE = "discipline"
    QTYPE = "qtype"
    SUBDISCIPLINE = "subdiscipline"
    DISCIPLINE_QTYPE = "discipline-qtype"


@dataclass(frozen=True, slots=True)
class ItemLabels:
    """Per item (in the order of a ``Responses``), its discipline, type and sub-discipline."""

    discipline: tuple[str, ...]
    qtype: tuple[str, ...]
    subdiscipline: tuple[str, ...]

    @classmethod
    def uniform(cls, n_items: int, discipline: str = "all") -> ItemLabels:
        return cls((discipline,) * n_items, ("unknown",) * n_items, ("",) * n_items)

    def names(self, by: Breakdown) -> tuple[str, ...]:
        """Each item's stratum name under ``by`` (``discipline / qtype`` for the cross)."""
        if by is Breakdown.DISCIPLINE:
            return self.discipline
        if by is Breakdown.QTYPE:
            return self.qtype
        if by is Breakdown.SUBDISCIPLINE:
            return tuple(
                f"{d} / {s}" if s else d
                for d, s in zip(self.discipline, self.subdiscipline, strict=True)
            )
        return tuple(f"{d} / {q}" for d, q in zip(self.discipline, self.qtype, strict=True))

    def strata(self, by: Breakdown) -> dict[str, BoolArray]:
        """Stratum name -> mask over the items, names sorted."""
        index: dict[str, int] = {}
        names = self.names(by)
        codes = np.fromiter(
            (index.setdefault(n, len(index)) for n in names), dtype=np.int64, count=len(names)
        )
        return {name: codes == index[name] for name in sorted(index)}

    def select(self, items: BoolArray | Sequence[bool]) -> ItemLabels:
        keep = np.flatnonzero(np.asarray(items, dtype=bool))
        return ItemLabels(
            tuple(self.discipline[i] for i in keep),
            tuple(self.qtype[i] for i in keep),
            tuple(self.subdiscipline[i] for i in keep),
        )
