"""A synthetic pool for the ``model-assisted`` tests: 480 items in four disciplines
(192/144/96/48) x two types = 8 strata, with 2PL parameters drawn from a seeded generator."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from bank.adaptive.assisted import PoolItem

FloatArray = NDArray[np.float64]

POOL = 480
DISCIPLINES = ("alg", "bio", "chem", "law")
DISCIPLINE_SIZES = (192, 144, 96, 48)


def two_pl_pool(seed: int) -> tuple[list[PoolItem], FloatArray, FloatArray, NDArray[np.int64]]:
    """The pool's items, their true discrimination ``a`` and difficulty ``b``, and each
    item's discipline index."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.6, 2.0, POOL)
    b = rng.normal(0.0, 1.2, POOL)
    discipline = np.repeat(np.arange(len(DISCIPLINES)), DISCIPLINE_SIZES)
    items = [
        PoolItem(
            (DISCIPLINES[d], "mc" if j % 3 else "open"),
            DISCIPLINES[d],
            float(a[j]),
            float(b[j]),
        )
        for j, d in enumerate(discipline.tolist())
    ]
    return items, a, b, discipline
