"""The rubric's scores, and the NaN convention every statistic follows.

Scores are integers 0-3 (DESIGN.md "Scoring"). A statistic that is undefined (a constant
rater, no answers in common) is NaN, never a warning, and ``None`` in JSON
(:func:`json_float`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

SCORE_LABELS: tuple[int, ...] = (0, 1, 2, 3)
"""The rubric's scores (DESIGN.md "Scoring"; papers/004 §2.3)."""

Scores = Sequence[int] | npt.NDArray[np.integer[Any]]

NAN = float("nan")


def json_float(value: float) -> float | None:
    """``value`` for JSON: NaN becomes ``None``."""
    return None if math.isnan(value) else float(value)
