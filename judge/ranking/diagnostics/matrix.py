"""The model-by-dimension score matrix every diagnostic is computed on.

:class:`ScoreMatrix` holds finite scores of models (rows) on capability dimensions
(columns) under unique, non-empty labels. The label and shape rules live here once:
:func:`check_shape` and :func:`check_labels` serve the matrix and
:func:`~judge.ranking.diagnostics.combined.diagnose`, which checks a table's labels before
it drops the models it cannot use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def check_shape(shape: tuple[int, ...], models: Sequence[str], dimensions: Sequence[str]) -> None:
    """Raise ValueError unless ``shape`` is ``(len(models), len(dimensions))``."""
    if shape != (len(models), len(dimensions)):
        raise ValueError(
            f"scores have shape {shape}, expected ({len(models)} models, "
            f"{len(dimensions)} dimensions)"
        )


def check_labels(
    models: Sequence[str], dimensions: Sequence[str], *, at_least_one: bool = False
) -> None:
    """Raise ValueError for an empty or a repeated model or dimension name, or, with
    ``at_least_one``, for no models or no dimensions (the first problem found, models
    first)."""
    for kind, names in (("model", models), ("dimension", dimensions)):
        if at_least_one and not names:
            raise ValueError(f"a score matrix needs at least one {kind}")
        seen: set[str] = set()
        for name in names:
            if not name:
                raise ValueError(f"a {kind} name is empty")
            if name in seen:
                raise ValueError(f"{kind} {name!r} appears twice")
            seen.add(name)


@dataclass(frozen=True, slots=True, eq=False)
class ScoreMatrix:
    """Scores of models (rows) on capability dimensions (columns).

    Attributes
    ----------
    models : tuple of str
        Row labels, unique and non-empty.
    dimensions : tuple of str
        Column labels, unique and non-empty.
    scores : ndarray of float, shape (n_models, n_dimensions)
        Finite scores; a read-only copy of what was given.
    """

    models: tuple[str, ...]
    dimensions: tuple[str, ...]
    scores: FloatArray = field(repr=False)

    def __init__(
        self,
        models: Sequence[str],
        dimensions: Sequence[str],
        scores: npt.ArrayLike,
    ) -> None:
        values = np.array(scores, dtype=np.float64)
        check_shape(values.shape, models, dimensions)
        check_labels(models, dimensions, at_least_one=True)
        bad = np.argwhere(~np.isfinite(values))
        if len(bad):
            row, col = (int(i) for i in bad[0])
            raise ValueError(
                f"model {models[row]!r}, dimension {dimensions[col]!r}: score "
                f"{values[row, col]!r} is not a finite number"
            )
        values.setflags(write=False)
        object.__setattr__(self, "models", tuple(models))
        object.__setattr__(self, "dimensions", tuple(dimensions))
        object.__setattr__(self, "scores", values)

    def select(self, dimensions: Sequence[str]) -> ScoreMatrix:
        """The same models on ``dimensions`` only (in that order)."""
        missing = [d for d in dimensions if d not in self.dimensions]
        if missing:
            raise ValueError(
                f"unknown dimension {missing[0]!r} (dimensions: {', '.join(self.dimensions)})"
            )
        columns = [self.dimensions.index(d) for d in dimensions]
        return ScoreMatrix(self.models, tuple(dimensions), self.scores[:, columns])

    def mean_scores(self) -> dict[str, float]:
        """Model -> the unweighted mean of its dimension scores."""
        return dict(zip(self.models, (float(m) for m in self.scores.mean(axis=1)), strict=True))


__all__ = ["FloatArray", "ScoreMatrix", "check_labels", "check_shape"]
