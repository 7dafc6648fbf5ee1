"""Recorded responses as a health input: the responses and items files the replay reads
(see ``bank.adaptive.recorded``) plus an optional models file.

Models (CSV): a header with ``model`` and any of ``family``, ``params_b`` and ``date``
(ISO ``YYYY-MM-DD``: release or first evaluation); other columns are ignored. Empty cells
are unknown. Every problem is reported at once as ``file:line: field: what``.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from dataclasses import dataclass

from bank.adaptive.recorded import (
    RecordedInputError,
    check_coverage,
    load_items,
    load_responses,
)
from bank.formats.input_problems import InputProblem, numbered_rows, read_text
from bank.health.labels import ItemLabels
from bank.health.responses import ModelInfo, Responses

MAX_PARAMS_B = 1e6


@dataclass(frozen=True, slots=True)
class RecordedBank:
    responses: Responses
    labels: ItemLabels


def load_recorded(
    responses_path: str | os.PathLike[str],
    items_path: str | os.PathLike[str],
    models_path: str | os.PathLike[str] | None = None,
) -> RecordedBank:
    """The response matrix (items × models, each item its own family) with its labels.

    Raises ``RecordedInputError`` listing every problem of the files, ``OSError`` when one
    cannot be read. A model of the models file that the responses lack is ignored; a model
    of the responses that the models file lacks has no family, size or date.
    """
    matrix = load_responses(responses_path)
    items = load_items(items_path)
    check_coverage(
        matrix, items, responses_path=os.fspath(responses_path), items_path=os.fspath(items_path)
    )
    known = {} if models_path is None else load_models(models_path)
    models = [known.get(name, ModelInfo(name)) for name in matrix.models]
    responses = Responses.from_dense(matrix.item_ids, models, matrix.scores.T)
    info = [items[item] for item in matrix.item_ids]
    labels = ItemLabels(
        tuple(i.discipline for i in info),
        tuple(i.type for i in info),
        tuple(i.subdiscipline for i in info),
    )
    return RecordedBank(responses, labels)


def load_models(path: str | os.PathLike[str]) -> dict[str, ModelInfo]:
    name, text = read_text(path, RecordedInputError)
    return parse_models(text, path=name)


def parse_models(text: str, *, path: str = "<models>") -> dict[str, ModelInfo]:
    """Model name -> its family, size and date; RecordedInputError listing every problem."""
    problems: list[InputProblem] = []
    rows = numbered_rows(text, path=path, problems=problems)
    header = next(rows, None)
    if header is None:
        raise RecordedInputError([InputProblem(path, 1, "file", "no header row")])
    columns = [c.strip() for c in header[1]]
    if "model" not in columns:
        raise RecordedInputError([InputProblem(path, 1, "model", "no 'model' column")])
    models: dict[str, ModelInfo] = {}
    for line, row in rows:
        if len(row) != len(columns):
            problems.append(
                InputProblem(path, line, "csv", f"{len(row)} cells, the header has {len(columns)}")
            )
            continue
        cells = {c: v.strip() for c, v in zip(columns, row, strict=True)}
        model = _model(cells, path, line, problems)
        if model is None:
            continue
        if model.name in models:
            problems.append(InputProblem(path, line, "model", f"{model.name!r} appears twice"))
        models[model.name] = model
    if problems:
        raise RecordedInputError(problems)
    return models


def _model(
    cells: dict[str, str], path: str, line: int, problems: list[InputProblem]
) -> ModelInfo | None:
    name = cells["model"]
    if not name:
        problems.append(InputProblem(path, line, "model", "empty model name"))
        return None
    size: float | None = None
    if cells.get("params_b"):
        try:
            size = float(cells["params_b"])
        except ValueError:
            size = math.nan
        if not 0 < size <= MAX_PARAMS_B:  # also false for NaN
            problems.append(
                InputProblem(path, line, "params_b", f"{cells['params_b']!r} is not a size > 0")
            )
            size = None
    date: dt.date | None = None
    if cells.get("date"):
        try:
            date = dt.date.fromisoformat(cells["date"])
        except ValueError:
            problems.append(
                InputProblem(path, line, "date", f"{cells['date']!r} is not a YYYY-MM-DD date")
            )
    return ModelInfo(name, cells.get("family") or None, size, date)
