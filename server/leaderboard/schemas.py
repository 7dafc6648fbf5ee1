"""The leaderboard as JSON: the per-model and per-discipline views, and the typed responses
of ``GET /v1/leaderboard``.

A row is a dict of named *fields* (``server.leaderboard.fields``, where each field is
declared with who sees it, its type, its value and its CSV columns); what vendors see is
the configured public subset, everyone else sees all of them. The same subset decides the
board-level parts: ``disciplines`` opens the per-discipline view, ``baselines`` and
``diagnostics`` the options of those names (``Visibility``). The API's responses are the
typed models of this module and of ``server.leaderboard.fields``, built only from the
visible fields (unknown keys are refused), so nothing outside the subset can reach a
vendor by another view or option. Every score travels with its interval and its tie
group, never alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from judge.panel import PanelRule
from server.api.bodies import RequestBody
from server.leaderboard.fields import (
    LeaderboardView,
    RowOut,
    StrictOut,
    Visibility,
    csv_row,
    rounded,
    row_fields,
)
from server.leaderboard.service import LeaderboardData


def leaderboard_json(
    data: LeaderboardData, *, fields: Collection[str] | None = None
) -> dict[str, Any]:
    """The per-model view; ``fields`` limits the rows to those fields (None: all).

    ``model_id`` is always present: it is what every other route takes."""
    board = data.board
    names = {row.key: row.name for row in board.rows}
    rows = []
    for everything in board_rows(data):
        rows.append(
            {
                k: v
                for k, v in everything.items()
                if k == "model_id" or fields is None or k in fields
            }
        )
    return {
        **_judging(data),
        "anchor": {
            "model_id": board.anchor,
            "name": names.get(board.anchor) if board.anchor else None,
            "designated": board.anchor_designated,
            "note": board.anchor_note,
        },
        "confidence_level": board.confidence_level,
        "tie_threshold": board.threshold,
        "groups": [[names[k] for k in group] for group in board.groups],
        "models": rows,
        **({"baselines": _baselines(data)} if data.baselines is not None else {}),
        **({"diagnostics": diagnostics_json(data)} if data.diagnostics else {}),
    }


def board_rows(data: LeaderboardData) -> list[dict[str, Any]]:
    """Every field of every row (``row_fields``), best first."""
    gaps = {g.model: g for g in data.contamination.gap.models} if data.contamination.gap else {}
    return [
        row_fields(
            row,
            model=data.models[row.key],
            replay=data.contamination.replay.get(row.key),
            gap=gaps.get(row.key),
        )
        for row in data.board.rows
    ]


def csv_rows(data: LeaderboardData) -> list[dict[str, Any]]:
    """One flat dict per model: ``CSV_COLUMNS`` then one column per discipline."""
    return [csv_row(fields, data.board.disciplines) for fields in board_rows(data)]


def _judging(data: LeaderboardData) -> dict[str, Any]:
    """Who scored: the default judge, the panel and its rule, and the default judge's
    agreement with people on the current calibration set (kappa with its interval)."""
    judges = data.judges
    view = data.calibration
    figures = view.figures if view is not None else None
    return {
        "judge": judges.default,
        "judges": list(judges.every_judge),
        "panel_rule": judges.rule.value,
        "prompt_version": data.prompt_version,
        "judge_calibration": None
        if view is None or figures is None
        else {
            "calibration_set": view.set_name,
            "set_version": view.set_version,
            "n": figures.n,
            "weighted_kappa": rounded(figures.weighted_kappa),
            "weighted_ci_low": rounded(figures.weighted_low),
            "weighted_ci_high": rounded(figures.weighted_high),
            "kappa": rounded(figures.kappa),
            "kappa_ci_low": rounded(figures.kappa_low),
            "kappa_ci_high": rounded(figures.kappa_high),
        },
    }


def diagnostics_json(data: LeaderboardData, *, by_id: bool = False) -> dict[str, Any] | None:
    """Anisotropy index, RSA and capability inconsistency per model name (``by_id``: per
    model id); a statistic that could not be computed is null, with its reason in
    ``unavailable`` (statistic -> reason)."""
    found = data.diagnostics
    if found is None:
        return None
    names = {row.key: row.key if by_id else row.name for row in data.board.rows}
    rsa, inconsistency = found.rsa, found.inconsistency
    return {
        "models": [names[k] for k in found.models],
        "anisotropy_index": rounded(found.anisotropy.index) if found.anisotropy else None,
        "rsa": {names[k]: r.amplitude for k, r in rsa.items()} if rsa is not None else None,
        "capability_inconsistency": (
            {names[k]: rounded(v) for k, v in inconsistency.values.items()}
            if inconsistency is not None
            else None
        ),
        "unavailable": dict(found.unavailable),
    }


def _baselines(data: LeaderboardData) -> dict[str, Any]:
    """Elo and Bradley-Terry per model, in leaderboard order."""
    base = data.baselines
    assert base is not None
    rows = []
    for row in data.board.rows:
        elo = base.elo.ratings.get(row.key) if base.elo else None
        bt = base.bradley_terry.log_strengths.get(row.key) if base.bradley_terry else None
        rows.append(
            {
                "model_id": row.key,
                "name": row.name,
                "elo": rounded(elo, 1),
                "bt_log_strength": rounded(bt),
            }
        )
    return {"n_comparisons": base.n_comparisons, "note": base.note, "models": rows}


def disciplines_json(data: LeaderboardData) -> dict[str, Any]:
    """The per-discipline view: for every discipline the models best first, with the
    standard error of each score (10-point scale)."""
    out = []
    for discipline in data.board.disciplines:
        ranked = sorted(
            (
                (row.disciplines[discipline], row)
                for row in data.board.rows
                if discipline in row.disciplines
            ),
            key=lambda pair: -pair[0].score,
        )
        out.append(
            {
                "discipline": discipline,
                "models": [
                    {
                        "model_id": row.key,
                        "name": row.name,
                        "score": rounded(score.score),
                        "standard_error": rounded(score.standard_error),
                        "items": score.n_items,
                    }
                    for score, row in ranked
                ],
            }
        )
    return {
        **_judging(data),
        "scale": 10,
        "disciplines": out,
    }


class AnchorIn(RequestBody):
    """``model_id`` of the new anchor; null returns to "the top model"."""

    model_id: uuid.UUID | None


class AnchorOut(BaseModel):
    id: int
    model_id: uuid.UUID | None
    set_by: str
    set_at: datetime


# --------------------------------------------------------------------------- #
# Response models
# --------------------------------------------------------------------------- #


class AnchorInfoOut(StrictOut):
    model_id: str | None
    name: str | None
    designated: bool
    note: str | None


class BaselineRowOut(StrictOut):
    model_id: str
    name: str | None
    elo: float | None
    bt_log_strength: float | None


class BaselinesOut(StrictOut):
    n_comparisons: int
    note: str | None
    models: list[BaselineRowOut]


class DiagnosticsOut(StrictOut):
    """ReLE's capability diagnostics; a statistic that could not be computed is null, with
    its reason in ``unavailable``."""

    models: list[str]
    anisotropy_index: float | None
    rsa: dict[str, float | None] | None
    capability_inconsistency: dict[str, float | None] | None
    unavailable: dict[str, str] = Field(default={})


class JudgeCalibrationOut(StrictOut):
    """The default judge's agreement with human scores on the calibration set: Cohen's
    kappa and its quadratic-weighted form with 95% bootstrap intervals (clustered by item
    family)."""

    calibration_set: str
    set_version: int
    n: int
    weighted_kappa: float | None
    weighted_ci_low: float | None
    weighted_ci_high: float | None
    kappa: float | None
    kappa_ci_low: float | None
    kappa_ci_high: float | None


class LeaderboardOut(StrictOut):
    """The per-model view."""

    judge: str
    """The default judge."""
    judges: list[str]
    """Every judge whose verdicts count (several: a panel)."""
    panel_rule: PanelRule
    prompt_version: str
    judge_calibration: JudgeCalibrationOut | None
    """None: the judge has no calibration on a calibration set."""
    anchor: AnchorInfoOut
    confidence_level: float
    tie_threshold: float
    groups: list[list[str]]
    models: list[RowOut]
    baselines: BaselinesOut | None = None
    diagnostics: DiagnosticsOut | None = None


class DisciplineModelOut(StrictOut):
    model_id: str | None
    name: str | None
    score: float | None
    standard_error: float | None
    items: int


class DisciplineBoardOut(StrictOut):
    discipline: str
    models: list[DisciplineModelOut]


class DisciplinesOut(StrictOut):
    """The per-discipline view."""

    judge: str
    judges: list[str]
    panel_rule: PanelRule
    judge_calibration: JudgeCalibrationOut | None
    prompt_version: str
    scale: int
    disciplines: list[DisciplineBoardOut]


def leaderboard_out(data: LeaderboardData, visibility: Visibility) -> LeaderboardOut:
    """The per-model view with only the fields ``visibility`` shows."""
    document = leaderboard_json(data, fields=visibility.fields)
    for part in ("baselines", "diagnostics"):
        if not visibility.shows(part):
            document.pop(part, None)
    if not visibility.shows("name"):  # board-level parts name models too
        document["anchor"]["name"] = None
        document["groups"] = [list(group) for group in data.board.groups]
        for row in document.get("baselines", {}).get("models", []):
            row["name"] = None
        if document.get("diagnostics"):
            document["diagnostics"] = diagnostics_json(data, by_id=True)
    return LeaderboardOut.model_validate(document)


def disciplines_out(data: LeaderboardData, visibility: Visibility) -> DisciplinesOut:
    """The per-discipline view (``Forbidden`` unless ``disciplines`` is visible)."""
    visibility.refuse_hidden(view=LeaderboardView.DISCIPLINES, baselines=False, diagnostics=False)
    document = disciplines_json(data)
    if not visibility.shows("name"):
        for block in document["disciplines"]:
            for model in block["models"]:
                model["name"] = None
    return DisciplinesOut.model_validate(document)
