"""LLMEval-Fair table 8 (``llmeval_fair_table8.tsv`` in the data directory) read with the standard
library, independently of :mod:`judge.ranking.score_table`."""

from __future__ import annotations

import csv
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tests.support.paths import SHARED_DATA

TABLE8 = SHARED_DATA / "llmeval_fair_table8.tsv"
DISCIPLINES = (
    "Engineering",
    "Economics",
    "Education",
    "Law",
    "Literature",
    "Management",
    "Science",
    "History",
    "Medicine",
    "Military",
)
ANCHOR = "Doubao-1.5-Thinking-Pro"


@dataclass(frozen=True)
class Table8:
    models: list[str]
    r_sota: npt.NDArray[np.float64]
    s_abs: npt.NDArray[np.float64]
    disciplines: npt.NDArray[np.float64]  # (59, 10), DISCIPLINES order


def load_table8() -> Table8:
    with TABLE8.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return Table8(
        models=[row["model"] for row in rows],
        r_sota=np.array([float(row["R_sota"]) for row in rows]),
        s_abs=np.array([float(row["S_abs"]) for row in rows]),
        disciplines=np.array([[float(row[d]) for d in DISCIPLINES] for row in rows]),
    )
