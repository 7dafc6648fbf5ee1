"""The leaderboard JSON as the report reads it.

The board is hostile input: any field may be missing, null or of another type. The
``as_*`` readers turn what is there into the expected type or None (an empty mapping or
sequence), and :func:`model_rows` normalises the rows once, so that the rest of the
report never looks at raw JSON.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def as_number(value: object) -> float | None:
    """A finite number, or None for anything else (null, NaN, text, booleans)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def as_integer(value: object) -> int | None:
    """A whole finite number as an int, None for anything else."""
    number = as_number(value)
    return int(number) if number is not None and number == int(number) else None


def as_mapping(value: object) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def as_sequence(value: object) -> Sequence[Any]:
    """``value`` if it is a list or tuple, else an empty one."""
    return value if isinstance(value, list | tuple) else ()


def as_name(value: object) -> str | None:
    """A non-empty string form of a name or identifier, None when absent."""
    if value is None or isinstance(value, Mapping | list | tuple):
        return None
    text = str(value)
    return text or None


@dataclass(frozen=True, slots=True)
class ModelRow:
    """One leaderboard row, normalised: whatever the board lacks is None or empty."""

    name: str
    model_id: str | None
    group: int | None
    row: Mapping[str, Any]
    disciplines: Mapping[str, float | None]


def model_rows(board: Mapping[str, Any]) -> list[ModelRow]:
    """The board's rows in its (leaderboard) order."""
    out = []
    for i, raw in enumerate(as_sequence(board.get("models"))):
        row = as_mapping(raw)
        scores = {
            str(d): as_number(as_mapping(s).get("score"))
            for d, s in as_mapping(row.get("disciplines")).items()
        }
        out.append(
            ModelRow(
                name=as_name(row.get("name")) or as_name(row.get("model_id")) or f"model {i + 1}",
                model_id=as_name(row.get("model_id")),
                group=as_integer(row.get("group")),
                row=row,
                disciplines=scores,
            )
        )
    return out


def tie_blocks(models: Sequence[ModelRow]) -> list[list[ModelRow]]:
    """Consecutive rows of one tie group (a row without a group is a block of its own)."""
    blocks: list[list[ModelRow]] = []
    for model in models:
        if blocks and model.group is not None and blocks[-1][-1].group == model.group:
            blocks[-1].append(model)
        else:
            blocks.append([model])
    return blocks


def tie_groups(board: Mapping[str, Any], models: Sequence[ModelRow]) -> list[list[str]]:
    """Groups of two or more models the data cannot order: the board's ``groups``, else
    the rows sharing a ``group``."""
    listed = [[str(n) for n in as_sequence(g)] for g in as_sequence(board.get("groups"))]
    if not listed:
        by_group: dict[int, list[str]] = {}
        for model in models:
            if model.group is not None:
                by_group.setdefault(model.group, []).append(model.name)
        listed = list(by_group.values())
    return [group for group in listed if len(group) >= 2]


def discipline_names(models: Sequence[ModelRow]) -> list[str]:
    return sorted({d for model in models for d in model.disciplines})


def confidence_level(board: Mapping[str, Any]) -> float:
    level = as_number(board.get("confidence_level"))
    return level if level is not None and 0 < level < 1 else 0.95
