"""Recorded responses for the replay: a response matrix and the items' strata.

* Responses (CSV, the format of ``mmlu_pro/responses.csv`` in the data directory): a ``model``
  column, then one column per item id; cells are ``1``, ``0``, a score in [0, 1], or empty
  (not answered).
* Items (JSONL, the format of ``items.jsonl``): ``question_id``; ``category`` is the
  discipline, ``src`` the sub-discipline, and ``type``/``qtype`` the question type when
  present (else ``mc``).

Every problem of a file is reported at once as ``file:line: field: what``
(:class:`~bank.formats.input_problems.InputError`). Parsers take text; :func:`load_responses`
and :func:`load_items` read files.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from bank.formats.input_problems import InputError, InputProblem, numbered_rows, read_text
from bank.formats.safe_json import JsonProblem, parse_json

STRATUM_FIELDS = ("discipline", "subdiscipline", "type")


class RecordedInputError(InputError):
    """A responses or items file that cannot be replayed."""


@dataclass(frozen=True, slots=True)
class ResponseMatrix:
    models: list[str]
    item_ids: list[str]
    scores: NDArray[np.float64]
    """models x items, scores in [0, 1], NaN where the model did not answer."""

    def subset(self, item_ids: Sequence[str]) -> ResponseMatrix:
        """The columns of ``item_ids`` in that order (NaN for ids it lacks)."""
        index = {item: i for i, item in enumerate(self.item_ids)}
        out = np.full((len(self.models), len(item_ids)), np.nan)
        for j, item in enumerate(item_ids):
            if item in index:
                out[:, j] = self.scores[:, index[item]]
        return ResponseMatrix(list(self.models), list(item_ids), out)


@dataclass(frozen=True, slots=True)
class ItemInfo:
    discipline: str
    subdiscipline: str
    type: str

    def stratum(self, fields: Sequence[str]) -> str:
        return " / ".join(getattr(self, f) for f in fields)


def parse_responses(text: str, *, path: str = "<responses>") -> ResponseMatrix:
    """The response matrix in ``text``; RecordedInputError listing every bad cell."""
    problems: list[InputProblem] = []
    rows = numbered_rows(text, path=path, problems=problems)
    header = next(rows, None)
    if header is None:
        raise RecordedInputError([InputProblem(path, 1, "file", "no header row")])
    _, columns = header
    columns = [c.strip() for c in columns]
    if not columns or columns[0] != "model":
        raise RecordedInputError(
            [InputProblem(path, 1, "model", "the first column must be 'model'")]
        )
    item_ids = columns[1:]
    duplicated = sorted({c for c in item_ids if item_ids.count(c) > 1})
    if duplicated:
        problems.append(InputProblem(path, 1, duplicated[0], "item id appears twice in the header"))
    models: list[str] = []
    values: list[list[float]] = []
    for line, row in rows:
        if len(row) != len(columns):
            problems.append(
                InputProblem(path, line, "csv", f"{len(row)} cells, the header has {len(columns)}")
            )
            continue
        name = row[0].strip()
        if not name:
            problems.append(InputProblem(path, line, "model", "empty model name"))
        elif name in models:
            problems.append(InputProblem(path, line, "model", f"{name!r} appears twice"))
        models.append(name)
        values.append(
            [
                _score(cell, path, line, column, problems)
                for column, cell in zip(item_ids, row[1:], strict=True)
            ]
        )
    if not models and not problems:
        problems.append(InputProblem(path, 2, "file", "no model rows"))
    if problems:
        raise RecordedInputError(problems)
    return ResponseMatrix(
        models, item_ids, np.array(values, dtype=np.float64).reshape(len(models), len(item_ids))
    )


def _score(cell: str, path: str, line: int, column: str, problems: list[InputProblem]) -> float:
    cell = cell.strip()
    if not cell:
        return math.nan
    try:
        value = float(cell)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:  # also false for NaN
        problems.append(
            InputProblem(path, line, column, f"{cell!r} is not a score in [0, 1] or empty")
        )
        return math.nan
    return value


def parse_items(text: str, *, path: str = "<items>") -> dict[str, ItemInfo]:
    """``question_id`` -> strata fields of every item in the JSONL ``text``; each line is
    parsed by :func:`bank.formats.safe_json.parse_json` (hostile lines are problems)."""
    problems: list[InputProblem] = []
    items: dict[str, ItemInfo] = {}
    for line, raw in enumerate(text.split("\n"), start=1):  # not splitlines: U+2028 is text
        if not raw.strip():
            continue
        try:
            record = parse_json(raw)
        except JsonProblem as problem:
            problems.append(InputProblem(path, line, "json", problem.describe()))
            continue
        if not isinstance(record, dict):
            problems.append(InputProblem(path, line, "json", "not an object"))
            continue
        missing = [f for f in ("question_id", "category") if record.get(f) in (None, "")]
        for f in missing:
            problems.append(InputProblem(path, line, f, "missing"))
        if missing:
            continue
        key = str(record["question_id"])
        if key in items:
            problems.append(InputProblem(path, line, "question_id", f"{key!r} appears twice"))
        qtype = record.get("type") or record.get("qtype") or "mc"
        items[key] = ItemInfo(str(record["category"]), str(record.get("src") or ""), str(qtype))
    if not items and not problems:
        problems.append(InputProblem(path, 1, "file", "no items"))
    if problems:
        raise RecordedInputError(problems)
    return items


def check_coverage(
    responses: ResponseMatrix, items: dict[str, ItemInfo], *, responses_path: str, items_path: str
) -> None:
    """Refuse response columns that the items file does not describe."""
    unknown = [item for item in responses.item_ids if item not in items]
    if unknown:
        shown = ", ".join(unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        raise RecordedInputError(
            [
                InputProblem(
                    responses_path,
                    1,
                    unknown[0],
                    f"{len(unknown)} item ids not in {items_path}: {shown}",
                )
            ]
        )


def load_responses(path: str | os.PathLike[str]) -> ResponseMatrix:
    name, text = read_text(path, RecordedInputError)
    return parse_responses(text, path=name)


def load_items(path: str | os.PathLike[str]) -> dict[str, ItemInfo]:
    name, text = read_text(path, RecordedInputError)
    return parse_items(text, path=name)
