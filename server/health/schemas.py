"""Typed bodies of the bank-health routes (the JSON of ``proctor bank health``)."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel

from bank.health.population import PopulationKind


class AbilitiesOut(BaseModel):
    n: int
    mean: float | None
    sd: float | None
    min: float | None
    max: float | None


class PopulationParametersOut(BaseModel):
    """The parameters of the population's kind (the others are null)."""

    top: int | None = None
    ranked_by: str | None = None
    ties: str | None = None
    names: list[str] | None = None
    family: str | None = None
    date: str | None = None
    rule: str | None = None


class PopulationOut(BaseModel):
    """The model population a report was computed on."""

    kind: PopulationKind
    text: str
    parameters: PopulationParametersOut
    n_models: int
    n_models_total: int
    models: list[str]
    excluded: dict[str, int]
    """Reason -> models left out for it."""
    abilities: AbilitiesOut


class DifficultyBinOut(BaseModel):
    difficulty: list[float]
    """[low, high) of 1 - p."""
    n_items: int
    ds: float | None
    cas: float | None


class FiguresOut(BaseModel):
    """The figures of the bank or of one stratum; null with a reason in ``missing``."""

    ds: float | None
    edr: float | None
    rcv: float | None
    cad: float | None
    cas: float | None
    stability: float | None
    s_sta: float | None
    s_dyn: float | None
    s_as: float | None
    ovl: float | None
    cbrc: float | None
    bqs: float | None
    bhi: float | None
    n_items: int
    n_models: int
    n: dict[str, int]
    """Figure -> the count it rests on (models, item pairs, items)."""
    missing: dict[str, str]
    """Figure -> why it is null."""
    by_difficulty: list[DifficultyBinOut]


class DiscriminationOut(BaseModel):
    point_biserial: float | None
    interval: list[float | None]
    spearman: float | None


class IrtOut(BaseModel):
    a: float | None
    b: float | None


class ItemHealthOut(BaseModel):
    p: float | None
    difficulty: float | None
    discrimination: DiscriminationOut
    cas: float | None
    cas_kfold: float | None
    inversions: int
    pairs: int
    cad: float | None
    separation: float | None
    irt: IrtOut
    n: int
    flags: list[str]


class FigureOut(BaseModel):
    value: float | None
    n: int
    reason: str | None


class SubsetOut(BaseModel):
    """A selective subset and how it compares with the whole bank (on the models with a
    score on both)."""

    n_items: int
    retained: int
    retention: float | None
    n_models: int
    models_without_subset_score: int
    rank_tau: FigureOut
    stability_subset: FigureOut
    stability_full: FigureOut
    ds_subset: FigureOut
    ds_full: FigureOut


class HealthOut(BaseModel):
    id: uuid.UUID
    computed_at: datetime
    population: PopulationOut
    choices: dict[str, str]
    bank: FiguresOut
    strata: dict[str, FiguresOut]
    items: dict[str, ItemHealthOut]
    """Item id -> figures; only flagged ones with ``items=flagged``, none with ``none``."""
    subsets: dict[str, SubsetOut]


class SnapshotSummaryOut(BaseModel):
    id: uuid.UUID
    computed_at: datetime
    population: PopulationOut
    bank: FiguresOut
