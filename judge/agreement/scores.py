"""The rubric's scores, and the NaN convention every statistic follows.

Scores are integers 0-3. A statistic that is undefined (a constant
rater, no answers in common) is NaN, never a warning, and ``None`` in JSON
(:func:`judge.numbers.json_float`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from judge.numbers import json_float

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

SCORE_LABELS: tuple[int, ...] = (0, 1, 2, 3)
"""The rubric's scores (LLMEval-Fair (Zhang et al.) §2.3)."""

Scores = Sequence[int] | npt.NDArray[np.integer[Any]]

NAN = float("nan")


def json_record(record: DataclassInstance) -> dict[str, Any]:
    """The fields of a record of statistics as a JSON-ready dict, in field order; float
    fields go through :func:`judge.numbers.json_float` (NaN and infinities become None)."""
    values = ((f.name, getattr(record, f.name)) for f in fields(record))
    return {name: json_float(v) if isinstance(v, float) else v for name, v in values}
