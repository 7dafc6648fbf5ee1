"""The reference answers a stand-in model answers from.

To be right with a configured probability a model must know the right answer, so the
server holds an ``AnswerKey``: read from a JSONL file (one ``{"question", "answer",
"discipline", "qtype", "options"?, "language"?}`` object per line; other fields, such as
those of the bank's canonical import format, are ignored) or from the bank tables of a
Proctor database (``AnswerKey.from_database``).

An incoming prompt is matched to a key question by the whitespace-normalised question: an
exact match first, else the longest key question contained in the prompt, so a runner's
prompt template around the question still finds it. Lookups are memoised.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

OPTION_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
PREFIX_CHARS = 24
"""Key questions at least this long are indexed by their first ``PREFIX_CHARS`` characters."""
LOOKUP_CACHE_SIZE = 16_384
DECOY_MAX_CHARS = 200
"""Only answers up to this length are offered as wrong answers to other questions."""
DATABASE_STATUSES: tuple[str, ...] = ("active", "anchor")
"""Item statuses ``from_database`` reads: the items a session can deliver."""

_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+pysqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgresql+psycopg2": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}


def normalise_whitespace(text: str) -> str:
    """``text`` with every run of whitespace replaced by one space, and stripped."""
    return " ".join(text.split())


@dataclass(frozen=True, slots=True)
class KeyItem:
    """One question and its reference answer. For multiple choice, ``answer`` is the letter
    (or letters, e.g. ``"AC"``) of the correct option(s)."""

    question: str
    answer: str
    discipline: str
    qtype: str
    options: tuple[str, ...] | None = None
    language: str = "en"


class AnswerKeyError(ValueError):
    """An unreadable answer key; ``str()`` is ``file:line: field: what is wrong``."""


class AnswerKey:
    """Reference answers, looked up by the question a prompt contains."""

    def __init__(self, items: Iterable[KeyItem]) -> None:
        self._exact: dict[str, KeyItem] = {}
        for item in items:
            self._exact.setdefault(normalise_whitespace(item.question), item)
        self._by_prefix: dict[str, list[str]] = defaultdict(list)
        self._short: list[str] = []
        for question in self._exact:
            if len(question) >= PREFIX_CHARS:
                self._by_prefix[question[:PREFIX_CHARS]].append(question)
            elif question:
                self._short.append(question)
        self._decoys: dict[tuple[str, str], list[str]] = defaultdict(list)
        for item in self._exact.values():
            if len(item.answer) <= DECOY_MAX_CHARS and item.answer.strip():
                self._decoys[(item.discipline.casefold(), item.qtype)].append(item.answer)
        self._cached_lookup = lru_cache(maxsize=LOOKUP_CACHE_SIZE)(self._lookup)

    def __len__(self) -> int:
        return len(self._exact)

    @property
    def items(self) -> list[KeyItem]:
        """Every item, in the order first read (one per distinct question)."""
        return list(self._exact.values())

    def lookup(self, prompt: str) -> KeyItem | None:
        """The item whose question ``prompt`` is (whitespace-normalised), else the item with
        the longest question contained in ``prompt``, else None. Memoised."""
        return self._cached_lookup(prompt)

    def answers_like(self, item: KeyItem) -> Sequence[str]:
        """Short reference answers of the same discipline and question type as ``item``
        (including its own): material for plausible wrong answers."""
        return self._decoys.get((item.discipline.casefold(), item.qtype), ())

    def _lookup(self, prompt: str) -> KeyItem | None:
        text = normalise_whitespace(prompt)
        exact = self._exact.get(text)
        if exact is not None:
            return exact
        best = ""
        by_prefix = self._by_prefix
        for start in range(len(text) - PREFIX_CHARS + 1):
            candidates = by_prefix.get(text[start : start + PREFIX_CHARS])
            if candidates:
                for question in candidates:
                    if len(question) > len(best) and text.startswith(question, start):
                        best = question
        if not best:
            for question in self._short:
                if len(question) > len(best) and question in text:
                    best = question
        return self._exact[best] if best else None

    # ------------------------------------------------------------------ readers

    @classmethod
    def from_jsonl(cls, path: str | Path) -> AnswerKey:
        """Read a JSONL answer key.

        Raises
        ------
        AnswerKeyError
            A line is not a JSON object or a field is missing or invalid; the message is
            ``file:line: field: what is wrong``.
        """
        where = str(path)
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise AnswerKeyError(f"{where}: cannot read: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise AnswerKeyError(f"{where}: not UTF-8: {exc.reason}") from None
        items: list[KeyItem] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            at = f"{where}:{number}"
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise AnswerKeyError(f"{at}: json: {exc.msg}") from None
            if not isinstance(data, dict):
                raise AnswerKeyError(f"{at}: json: a line must be an object")
            items.append(_item_from_json(data, at))
        return cls(items)

    @classmethod
    def from_database(cls, url: str, *, statuses: Sequence[str] = DATABASE_STATUSES) -> AnswerKey:
        """Read the items of ``statuses`` from the bank tables of the database at ``url``.

        Runs its own event loop: call it before the server starts, not from async code
        (use ``load_database`` there).
        """
        return asyncio.run(cls.load_database(url, statuses=statuses))

    @classmethod
    async def load_database(
        cls, url: str, *, statuses: Sequence[str] = DATABASE_STATUSES
    ) -> AnswerKey:
        """``from_database`` for async callers."""
        from bank.models import Item  # the bank is only needed for this reader

        engine = create_async_engine(_async_url(url))
        try:
            async with engine.connect() as connection:
                rows = await connection.stream(
                    select(
                        Item.question,
                        Item.answer,
                        Item.discipline,
                        Item.qtype,
                        Item.options,
                        Item.language,
                    )
                    .where(Item.status.in_(list(statuses)))
                    .order_by(Item.slot)
                    .execution_options(yield_per=5_000)
                )
                items = [
                    KeyItem(
                        question=question,
                        answer=answer,
                        discipline=discipline,
                        qtype=qtype,
                        options=tuple(options) if options else None,
                        language=language or "en",
                    )
                    async for question, answer, discipline, qtype, options, language in rows
                ]
        finally:
            await engine.dispose()
        return cls(items)

    @classmethod
    def load(cls, source: str) -> AnswerKey:
        """A database URL (``scheme://...``) via ``from_database``, else a JSONL file."""
        return cls.from_database(source) if "://" in source else cls.from_jsonl(source)


def _async_url(url: str) -> str:
    parsed = make_url(url)
    driver = _ASYNC_DRIVERS.get(parsed.drivername)
    return parsed.set(drivername=driver).render_as_string(False) if driver else url


def _text(data: dict[str, Any], name: str, at: str, *, default: str | None = None) -> str:
    value = data.get(name, default)
    if value is None:
        raise AnswerKeyError(f"{at}: {name}: missing")
    if not isinstance(value, str):
        raise AnswerKeyError(f"{at}: {name}: must be a string, not {type(value).__name__}")
    if not value.strip():
        raise AnswerKeyError(f"{at}: {name}: must not be empty")
    return value


def _item_from_json(data: dict[str, Any], at: str) -> KeyItem:
    question = _text(data, "question", at)
    answer = data.get("answer")
    if isinstance(answer, int | float) and not isinstance(answer, bool):
        data = {**data, "answer": str(answer)}
    answer = _text(data, "answer", at)
    discipline = _text(data, "discipline", at)
    qtype = _text(data, "qtype", at)
    language = _text(data, "language", at, default="en")
    raw_options = data.get("options")
    options: tuple[str, ...] | None = None
    if raw_options is not None:
        if not isinstance(raw_options, list) or not all(isinstance(o, str) for o in raw_options):
            raise AnswerKeyError(f"{at}: options: must be a list of strings")
        if len(raw_options) > len(OPTION_LETTERS):
            raise AnswerKeyError(f"{at}: options: more than {len(OPTION_LETTERS)} options")
        options = tuple(raw_options) or None
    if options and answer not in OPTION_LETTERS[: len(options)] and answer in options:
        answer = OPTION_LETTERS[options.index(answer)]  # the option's text: store its letter
    return KeyItem(
        question=question,
        answer=answer,
        discipline=discipline,
        qtype=qtype,
        options=options,
        language=language,
    )
