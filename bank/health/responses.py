"""The sparse response matrix the health statistics read.

A cell is one model's score on one item: ``y = s / 3`` for a rubric score ``s`` in 0..3, or a
recorded 0/1; correctness is ``c = [s >= 2]`` (``y >= 2/3``). Only observed cells are held
(never imputed as 0). Cells are sorted by (item, model), so a per-item reduction is one
``np.add.reduceat`` or ``np.bincount``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

CORRECT_AT = 2.0 / 3.0
"""``y`` at or above which a response counts as correct (rubric score 2 of 3)."""
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """A model of the population: its family (one generation, e.g. Qwen2.5) and size order
    the within-family inversions; its date (release or first evaluation) feeds S_Dyn."""

    name: str
    family: str | None = None
    params_b: float | None = None
    date: dt.date | None = None


@dataclass(frozen=True, slots=True)
class Responses:
    """Observed cells of an items × models matrix.

    Attributes
    ----------
    item_ids, models
        The row and column labels.
    item, model, score
        One entry per observed cell, sorted by (item, model); ``score`` in [0, 1].
    family
        Per item, the index of its family (variants of one question share it); bootstraps
        and folds split by family, never by item.
    """

    item_ids: tuple[str, ...]
    models: tuple[ModelInfo, ...]
    item: IntArray
    model: IntArray
    score: FloatArray
    family: IntArray

    @classmethod
    def from_cells(
        cls,
        item_ids: Sequence[str],
        models: Sequence[ModelInfo],
        item: Sequence[int] | IntArray,
        model: Sequence[int] | IntArray,
        score: Sequence[float] | FloatArray,
        family: Sequence[int] | IntArray | None = None,
    ) -> Responses:
        """Validate and sort the cells; ``family`` None: every item its own family.

        Raises ``ValueError`` for out-of-range indices or scores, and for a cell given twice.
        """
        items = np.asarray(item, dtype=np.int64)
        cols = np.asarray(model, dtype=np.int64)
        values = np.asarray(score, dtype=np.float64)
        n_items, n_models = len(item_ids), len(models)
        if not items.shape == cols.shape == values.shape or items.ndim != 1:
            raise ValueError("item, model and score must be 1-d arrays of one length")
        if items.size and (items.min() < 0 or items.max() >= n_items):
            raise ValueError("an item index is out of range")
        if cols.size and (cols.min() < 0 or cols.max() >= n_models):
            raise ValueError("a model index is out of range")
        if not np.all(np.isfinite(values)) or np.any((values < 0) | (values > 1)):
            raise ValueError("scores must be finite and in [0, 1]")
        order = np.lexsort((cols, items))
        items, cols, values = items[order], cols[order], values[order]
        if items.size > 1 and np.any((np.diff(items) == 0) & (np.diff(cols) == 0)):
            raise ValueError("a (item, model) cell is given twice")
        families = (
            np.arange(n_items, dtype=np.int64)
            if family is None
            else np.asarray(family, dtype=np.int64)
        )
        if families.shape != (n_items,):
            raise ValueError("family must give one family index per item")
        return cls(tuple(item_ids), tuple(models), items, cols, values, families)

    @classmethod
    def from_dense(
        cls,
        item_ids: Sequence[str],
        models: Sequence[ModelInfo],
        matrix: FloatArray,
        family: Sequence[int] | IntArray | None = None,
    ) -> Responses:
        """From an items × models array with NaN where a model did not answer."""
        dense = np.asarray(matrix, dtype=np.float64)
        if dense.shape != (len(item_ids), len(models)):
            raise ValueError(f"matrix is {dense.shape}, not items × models")
        rows, cols = np.nonzero(~np.isnan(dense))
        return cls.from_cells(item_ids, models, rows, cols, dense[rows, cols], family)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def correct(self) -> BoolArray:
        """Per cell, ``c = [s >= 2]``."""
        return self.score >= CORRECT_AT - _EPS

    def dense(self) -> FloatArray:
        """The items × models array, NaN where unobserved (for small matrices and tests)."""
        out = np.full((self.n_items, self.n_models), np.nan)
        out[self.item, self.model] = self.score
        return out

    def responses_per_item(self) -> IntArray:
        return np.bincount(self.item, minlength=self.n_items).astype(np.int64)

    def responses_per_model(self) -> IntArray:
        return np.bincount(self.model, minlength=self.n_models).astype(np.int64)

    def abilities(self, cells: BoolArray | None = None) -> FloatArray:
        """theta_m: each model's mean score over its (selected) cells; NaN without any
        (Capability Alignment, eq. 1)."""
        keep = slice(None) if cells is None else cells
        totals = np.bincount(self.model[keep], self.score[keep], minlength=self.n_models)
        counts = np.bincount(self.model[keep], minlength=self.n_models)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)

    def select(
        self, *, items: BoolArray | None = None, models: BoolArray | None = None
    ) -> Responses:
        """The sub-matrix of the selected items and models, re-indexed (labels, families
        and model order kept)."""
        item_keep = np.ones(self.n_items, bool) if items is None else np.asarray(items, bool)
        model_keep = np.ones(self.n_models, bool) if models is None else np.asarray(models, bool)
        item_map = np.cumsum(item_keep) - 1
        model_map = np.cumsum(model_keep) - 1
        cells = item_keep[self.item] & model_keep[self.model]
        kept_items = np.flatnonzero(item_keep)
        return Responses(
            tuple(self.item_ids[i] for i in kept_items),
            tuple(m for m, keep in zip(self.models, model_keep, strict=True) if keep),
            item_map[self.item[cells]],
            model_map[self.model[cells]],
            self.score[cells],
            self.family[item_keep],
        )
