"""What a sample was drawn from: the ``source`` its commitment binds (pure, no I/O).

Every sample records its source (``Sample.source``, JSON) and commits to it
(``bank.sampling.commitment``). A source is one of three kinds, one frozen class each with
exactly the fields of its kind:

* :class:`StratifiedSource`, ``{"kind": "stratified", "disciplines": [...]}``: the stratified
  bank sample (``bank.sampling.service.draw_sample``), with the disciplines its plan gave
  quotas, in the plan's order;
* :class:`AnchorSource`, ``{"kind": "anchor"}``: the private anchor set (``bank.anchor_set``);
* :class:`ItemSetSource`, ``{"kind": "item_set", "item_set_id": "<uuid>"}``: a saved item set
  (``bank.item_sets``), its id as a lowercase hyphenated UUID.

:func:`source_json` is the one writer of that JSON and :func:`parse_source` the one reader.
The reader accepts exactly what the writer writes (``source_json(parse_source(d)) == d``)
and refuses anything else, whatever its shape, with a :class:`SourceError` that says what
is wrong: a source read back hashes to the very bytes that were committed to.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Literal, TypeAlias, assert_never

from bank.formats.safe_json import json_type

SHOWN = 40
"""How many characters of a refused kind, field name or id a message quotes (its repr: at
most twice as many)."""


class SourceKind(StrEnum):
    """What a sample was drawn from: the ``kind`` of its committed ``source``."""

    STRATIFIED = "stratified"
    """The stratified bank sample; ``source["disciplines"]`` lists the disciplines planned."""
    ANCHOR = "anchor"
    """The private anchor set."""
    ITEM_SET = "item_set"
    """A saved item set; ``source["item_set_id"]`` is its id."""


@dataclass(frozen=True, slots=True)
class StratifiedSource:
    """The stratified bank sample, planned over ``disciplines`` (in the plan's order)."""

    disciplines: tuple[str, ...]
    kind: ClassVar[Literal[SourceKind.STRATIFIED]] = SourceKind.STRATIFIED


@dataclass(frozen=True, slots=True)
class AnchorSource:
    """The private anchor set."""

    kind: ClassVar[Literal[SourceKind.ANCHOR]] = SourceKind.ANCHOR


@dataclass(frozen=True, slots=True)
class ItemSetSource:
    """The saved item set ``item_set_id``."""

    item_set_id: uuid.UUID
    kind: ClassVar[Literal[SourceKind.ITEM_SET]] = SourceKind.ITEM_SET


SampleSource: TypeAlias = StratifiedSource | AnchorSource | ItemSetSource
"""What a sample was drawn from (see the module docstring)."""

_FIELDS: dict[SourceKind, frozenset[str]] = {
    SourceKind.STRATIFIED: frozenset({"disciplines"}),
    SourceKind.ANCHOR: frozenset(),
    SourceKind.ITEM_SET: frozenset({"item_set_id"}),
}
"""The fields of each kind's JSON besides ``kind``."""
_KINDS = {kind.value: kind for kind in SourceKind}


class SourceError(ValueError):
    """A value that is not a sample source; the message says why. ``kind`` is the kind it
    names, when that much is readable."""

    def __init__(self, message: str, kind: SourceKind | None = None) -> None:
        super().__init__(message)
        self.kind = kind


def source_json(source: SampleSource) -> dict[str, Any]:
    """The JSON object of ``source``: what ``Sample.source`` stores and the commitment
    hashes (see the module docstring)."""
    if isinstance(source, StratifiedSource):
        return {"kind": source.kind.value, "disciplines": list(source.disciplines)}
    if isinstance(source, AnchorSource):
        return {"kind": source.kind.value}
    if isinstance(source, ItemSetSource):
        return {"kind": source.kind.value, "item_set_id": str(source.item_set_id)}
    assert_never(source)


def parse_source(data: object) -> SampleSource:
    """The source whose JSON object is ``data`` (as :func:`source_json` writes it).

    Raises :class:`SourceError` for anything else: not an object, no kind or an unknown
    one, a field missing or not of the kind, disciplines that are not a list of strings,
    an item set id that is not a UUID in canonical form (lowercase, hyphenated)."""
    if not isinstance(data, Mapping):
        raise SourceError(f"must be a JSON object, not {json_type(data)}")
    kind = _kind(data)
    expected = _FIELDS[kind]
    extra = sorted(_shown(key) for key in data if key != "kind" and key not in expected)
    if extra:
        raise SourceError(f"kind {kind} has no field {extra[0]}", kind)
    missing = sorted(expected - data.keys())
    if missing:
        raise SourceError(f"kind {kind} needs {missing[0]}", kind)
    if kind is SourceKind.STRATIFIED:
        return StratifiedSource(_disciplines(data["disciplines"]))
    if kind is SourceKind.ANCHOR:
        return AnchorSource()
    if kind is SourceKind.ITEM_SET:
        return ItemSetSource(_item_set_id(data["item_set_id"]))
    assert_never(kind)


def _kind(data: Mapping[Any, Any]) -> SourceKind:
    if "kind" not in data:
        raise SourceError("has no kind")
    kind = data["kind"]
    if not isinstance(kind, str):
        raise SourceError(f"kind must be a string, not {json_type(kind)}")
    if kind not in _KINDS:
        raise SourceError(f"unknown kind {_shown(kind)} (known: {', '.join(_KINDS)})")
    return _KINDS[kind]


def _disciplines(value: object) -> tuple[str, ...]:
    kind = SourceKind.STRATIFIED
    if not isinstance(value, list):
        raise SourceError(f"disciplines must be a list of strings, not {json_type(value)}", kind)
    for index, element in enumerate(value):
        if not isinstance(element, str):
            raise SourceError(
                f"disciplines[{index}] must be a string, not {json_type(element)}", kind
            )
    return tuple(value)


def _item_set_id(value: object) -> uuid.UUID:
    kind = SourceKind.ITEM_SET
    if not isinstance(value, str):
        raise SourceError(f"item_set_id must be a UUID string, not {json_type(value)}", kind)
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        parsed = None
    if parsed is None or str(parsed) != value:
        raise SourceError(
            f"item_set_id {_shown(value)} is not a UUID in canonical form (lowercase, hyphenated)",
            kind,
        )
    return parsed


def _shown(value: object) -> str:
    """``value`` quoted for a message: the repr of its first ``SHOWN`` characters, cut at
    ``2 * SHOWN`` (escapes are long), ``...`` after it when cut."""
    long = isinstance(value, str) and len(value) > SHOWN
    text = repr(value[:SHOWN] if isinstance(value, str) else value)
    if long or len(text) > 2 * SHOWN:
        return text[: 2 * SHOWN] + "..."
    return text


