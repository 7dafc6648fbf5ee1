"""Calibration sets: frozen, versioned answers with human scores that judges are run on.

A set comes from the review queue (every answer people scored: a ``Verdict`` of rater
``human:<reviewer>``, prompt version ``HUMAN_PROMPT_VERSION``; several reviewers of one
answer give their mean, rounded half up) or from a CSV file
``question,reference,answer,human_score[,language,discipline,model_family,cluster]``.
A set is never changed: saving under a name that exists makes version ``n + 1`` of it.
The CSV reader collects every problem of a file (``file:line: field: what``) and saves
nothing unless the whole file is good; NUL and other control characters, text that is not
UTF-8 and over-long fields are refused.

LLMEval-Fair (Zhang et al., "LLMEval-Fair: A Large-Scale Longitudinal Study on Robust and
Fair Evaluation of Large Language Models", §3.4, app. F.2) calibrates its judges on answers
scored by human experts in several rounds; a set here is one such frozen round.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import load_only

from bank.formats.input_problems import InputError, InputProblem, numbered_rows, read_text
from bank.models import Item
from judge.reasoning import split_reasoning
from server.calibration.models import CalibrationAnswer, CalibrationSet, CalibrationSource
from server.registry.models import RegisteredModel
from server.review.raters import HUMAN_PREFIX, HUMAN_PROMPT_VERSION
from server.scoring.models import JudgeCalibration, Verdict
from server.sessions.models import Answer, EvalSession

REQUIRED_COLUMNS: tuple[str, ...] = ("question", "reference", "answer", "human_score")
OPTIONAL_COLUMNS: tuple[str, ...] = ("language", "discipline", "model_family", "cluster")
MAX_TEXT = 100_000
"""Characters of a question, reference or answer."""
MAX_LABEL = 100
"""Characters of a discipline, model family or cluster (their columns' width)."""
MAX_ANSWERS = 100_000
"""Answers of one set."""
DEFAULT_LANGUAGE = "en"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
LANGUAGE_RE = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8}){0,2}$")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
"""What text may not contain: C0/C1 controls (tab, newline and carriage return are allowed
in long text), line and paragraph separators, lone surrogates."""
_LABEL_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


class CalibrationInputError(InputError):
    """A calibration file that cannot be used; ``errors`` lists every problem found."""


class SetNameError(ValueError):
    """A set name that is not ``NAME_RE``."""


class EmptySetError(ValueError):
    """Nothing to freeze (no human verdicts in the review queue)."""


@dataclass(frozen=True, slots=True)
class CalibrationRow:
    """One answer of a calibration set as read or collected, before it is stored."""

    question: str
    reference: str
    answer: str
    human_score: int
    language: str = DEFAULT_LANGUAGE
    discipline: str | None = None
    model_family: str | None = None
    cluster: str | None = None


def check_set_name(name: str) -> str:
    """``name`` if it is a valid set name (letters, digits, ``._-``, at most 100, starting
    with a letter or digit); ``SetNameError`` otherwise."""
    if not NAME_RE.fullmatch(name):
        raise SetNameError(
            f"{name[:120]!r} is not a set name (letters, digits, '.', '_', '-'; at most 100)"
        )
    return name


def content_sha256(rows: Sequence[CalibrationRow]) -> str:
    """SHA-256 of the rows' content in order (canonical JSON of every field)."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(asdict(row), ensure_ascii=False, sort_keys=True).encode())
        digest.update(b"\n")
    return digest.hexdigest()


# --- the CSV file -----------------------------------------------------------------------


def read_calibration_csv(path: str | os.PathLike[str]) -> list[CalibrationRow]:
    """The answers of a calibration CSV file, in file order.

    Columns ``question``, ``reference``, ``answer`` and ``human_score`` (an integer 0-3)
    are required; ``language`` (default ``en``), ``discipline``, ``model_family`` and
    ``cluster`` (the item family the bootstrap resamples as one; empty: its own) are
    optional; other columns are refused (a typo must not be ignored). A UTF-8 byte-order
    mark is allowed, blank lines are skipped.

    Raises
    ------
    CalibrationInputError
        Every problem found, each ``file:line: field: what``: not UTF-8, an empty file, a
        missing or repeated column, a row with the wrong number of fields, an empty
        required field, a score that is not 0-3, control characters or NUL, a field that is
        too long, more than ``MAX_ANSWERS`` answers.
    OSError
        The file cannot be read.
    """
    name, text = read_text(path, CalibrationInputError)
    return parse_calibration_csv(name, text)


def parse_calibration_csv(name: str, text: str) -> list[CalibrationRow]:
    """:func:`read_calibration_csv` on text already read (``name`` names it in messages)."""
    problems: list[InputProblem] = []
    rows: list[CalibrationRow] = []
    header: list[str] | None = None
    text = text.removeprefix("\ufeff")
    for line, cells in numbered_rows(text, path=name, problems=problems):
        if header is None:
            header = [cell.strip() for cell in cells]
            if not _header_ok(name, header, line, problems):
                break
            continue
        row = _row(name, header, cells, line, problems)
        if row is not None:
            rows.append(row)
        if len(rows) > MAX_ANSWERS:
            problems.append(InputProblem(name, line, "file", f"more than {MAX_ANSWERS} answers"))
            break
    if header is None and not problems:
        problems.append(
            InputProblem(
                name, None, "file", f"is empty; expected a header {','.join(REQUIRED_COLUMNS)}"
            )
        )
    elif not problems and not rows:
        problems.append(InputProblem(name, None, "file", "has a header but no answers"))
    if problems:
        raise CalibrationInputError(problems)
    return rows


def _header_ok(name: str, header: list[str], line: int, problems: list[InputProblem]) -> bool:
    before = len(problems)
    known = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
    for column in dict.fromkeys(header):
        shown = _shown(column)
        if header.count(column) > 1:
            problems.append(InputProblem(name, line, shown, "column appears twice in the header"))
        elif column not in known:
            problems.append(
                InputProblem(name, line, shown, f"unknown column (known: {','.join(known)})")
            )
    for column in REQUIRED_COLUMNS:
        if column not in header:
            problems.append(InputProblem(name, line, column, "required column is missing"))
    return len(problems) == before


def _row(
    name: str, header: list[str], cells: list[str], line: int, problems: list[InputProblem]
) -> CalibrationRow | None:
    if len(cells) != len(header):
        problems.append(
            InputProblem(
                name, line, "row", f"has {len(cells)} fields, the header has {len(header)}"
            )
        )
        return None
    values = dict(zip(header, cells, strict=True))
    before = len(problems)

    def problem(field: str, message: str) -> None:
        problems.append(InputProblem(name, line, field, message))

    texts = {f: _long_text(values[f], f, problem) for f in ("question", "reference", "answer")}
    score_text = values["human_score"].strip()
    if score_text not in {"0", "1", "2", "3"}:
        problem("human_score", f"{_shown(values['human_score'])!r} is not an integer 0-3")
    labels = {f: _label(values.get(f, ""), f, problem) for f in OPTIONAL_COLUMNS}
    language = labels["language"] or DEFAULT_LANGUAGE
    if labels["language"] and not LANGUAGE_RE.fullmatch(language):
        problem("language", f"{_shown(language)!r} is not a language tag such as en or zh")
    if len(problems) > before:
        return None
    return CalibrationRow(
        question=texts["question"] or "",
        reference=texts["reference"] or "",
        answer=texts["answer"] or "",
        human_score=int(score_text),
        language=language,
        discipline=labels["discipline"],
        model_family=labels["model_family"],
        cluster=labels["cluster"],
    )


def _long_text(value: str, field: str, problem: Callable[[str, str], None]) -> str | None:
    text = value.strip()
    if not text:
        problem(field, "is empty")
        return None
    if len(text) > MAX_TEXT:
        problem(field, f"is longer than {MAX_TEXT} characters")
        return None
    bad = _CONTROL_RE.search(text)
    if bad is not None:
        problem(field, f"contains the control character {_codepoint(bad.group())} at {bad.start()}")
        return None
    return text


def _label(value: str, field: str, problem: Callable[[str, str], None]) -> str | None:
    text = value.strip()
    if not text:
        return None
    if len(text) > MAX_LABEL:
        problem(field, f"is longer than {MAX_LABEL} characters")
        return None
    bad = _LABEL_CONTROL_RE.search(text)
    if bad is not None:
        problem(field, f"contains the control character {_codepoint(bad.group())}")
        return None
    return text


def _codepoint(char: str) -> str:
    return f"U+{ord(char):04X}"


def _shown(text: str, limit: int = 40) -> str:
    """``text`` safe and short for a message (controls escaped)."""
    safe = _LABEL_CONTROL_RE.sub(lambda m: _codepoint(m.group()), text)
    return safe if len(safe) <= limit else safe[:limit] + "..."


# --- the review queue --------------------------------------------------------------------


def rounded_mean(scores: Sequence[int]) -> int:
    """The mean of reviewers' scores of one answer, rounded half up (2 and 3 give 3)."""
    total, count = sum(scores), len(scores)
    return (2 * total + count) // (2 * count)


async def review_rows(db: AsyncSession) -> list[CalibrationRow]:
    """Every answer of the review queue that people scored, with their rounded mean score,
    in (session, position) order. The answer is the stored answer (the judge sees its final
    part); the cluster is the item's family, the model family the session model's."""
    human = select(Verdict.session_id, Verdict.position, Verdict.score).where(
        Verdict.judge.startswith(HUMAN_PREFIX, autoescape=True),
        Verdict.prompt_version == HUMAN_PROMPT_VERSION,
        Verdict.score.is_not(None),
    )
    scores: dict[tuple[uuid.UUID, int], list[int]] = defaultdict(list)
    for session_id, position, score in (await db.execute(human)).all():
        scores[(session_id, position)].append(int(score))
    if not scores:
        return []
    rows = (
        await db.execute(
            select(
                Answer.session_id,
                Answer.position,
                Answer.answer,
                Item.question,
                Item.answer,
                Item.language,
                Item.discipline,
                Item.family_id,
                RegisteredModel.family,
            )
            .join(Item, Item.id == Answer.item_id)
            .join(EvalSession, EvalSession.id == Answer.session_id)
            .join(RegisteredModel, RegisteredModel.id == EvalSession.model_id)
            .where(Answer.session_id.in_({key[0] for key in scores}))
            .order_by(Answer.session_id, Answer.position)
        )
    ).all()
    return [
        CalibrationRow(
            question=row.question,
            reference=row[4],
            answer=split_reasoning(row[2])[0],
            human_score=rounded_mean(scores[(row.session_id, row.position)]),
            language=row.language,
            discipline=row.discipline,
            model_family=row.family,
            cluster=str(row.family_id),
        )
        for row in rows
        if (row.session_id, row.position) in scores
    ]


# --- storing and reading sets ------------------------------------------------------------


async def create_set(
    db: AsyncSession,
    *,
    name: str,
    rows: Sequence[CalibrationRow],
    source: CalibrationSource,
    created_by: str,
) -> CalibrationSet:
    """Freeze ``rows`` as the next version of set ``name`` (1 for a new name).

    Raises
    ------
    SetNameError
        A bad name.
    EmptySetError
        No rows.
    """
    check_set_name(name)
    if not rows:
        raise EmptySetError("no answers to freeze")
    newest = (
        await db.execute(
            select(func.max(CalibrationSet.version)).where(CalibrationSet.name == name)
        )
    ).scalar_one_or_none()
    record = CalibrationSet(
        name=name,
        version=(newest or 0) + 1,
        source=source.value,
        n=len(rows),
        sha256=content_sha256(rows),
        created_by=created_by,
    )
    db.add(record)
    await db.flush()
    db.add_all(
        CalibrationAnswer(set_id=record.id, index=index, **asdict(row))
        for index, row in enumerate(rows)
    )
    await db.flush()
    return record


async def set_from_review(db: AsyncSession, *, name: str, created_by: str) -> CalibrationSet:
    """Freeze the review queue's human-scored answers as the next version of ``name``."""
    check_set_name(name)
    rows = await review_rows(db)
    if not rows:
        raise EmptySetError("the review queue has no answers scored by people yet")
    return await create_set(
        db, name=name, rows=rows, source=CalibrationSource.REVIEW, created_by=created_by
    )


async def find_set(
    db: AsyncSession, name: str, version: int | None = None
) -> CalibrationSet | None:
    """Version ``version`` of set ``name`` (default: its newest), or None."""
    statement = select(CalibrationSet).where(CalibrationSet.name == name)
    if version is not None:
        statement = statement.where(CalibrationSet.version == version)
    found: CalibrationSet | None = (
        await db.execute(statement.order_by(CalibrationSet.version.desc()).limit(1))
    ).scalar_one_or_none()
    return found


async def set_answers(db: AsyncSession, set_id: uuid.UUID) -> list[CalibrationAnswer]:
    """The answers of a set, by index."""
    return list(
        (
            await db.execute(
                select(CalibrationAnswer)
                .where(CalibrationAnswer.set_id == set_id)
                .order_by(CalibrationAnswer.index)
            )
        ).scalars()
    )


async def list_sets(db: AsyncSession) -> list[CalibrationSet]:
    """Every set version, newest first."""
    return list(
        (
            await db.execute(
                select(CalibrationSet).order_by(
                    CalibrationSet.created_at.desc(),
                    CalibrationSet.name,
                    CalibrationSet.version.desc(),
                )
            )
        ).scalars()
    )


async def runs_by_id(
    db: AsyncSession, *, run_ids: Collection[uuid.UUID]
) -> dict[uuid.UUID, JudgeCalibration]:
    """The stored runs of ``run_ids`` (with the judge's score of every answer), by id; ids
    with no run are left out."""
    if not run_ids:
        return {}
    rows = await db.execute(select(JudgeCalibration).where(JudgeCalibration.id.in_(run_ids)))
    return {row.id: row for row in rows.scalars()}


async def answer_labels(db: AsyncSession, *, set_id: uuid.UUID) -> list[CalibrationAnswer]:
    """The answers of a set by index with their human score, discipline, model family and
    cluster only (what per-group kappas need): the texts are not read, and touching one
    raises."""
    rows = await db.execute(
        select(CalibrationAnswer)
        .options(
            load_only(
                CalibrationAnswer.index,
                CalibrationAnswer.human_score,
                CalibrationAnswer.discipline,
                CalibrationAnswer.model_family,
                CalibrationAnswer.cluster,
                raiseload=True,
            )
        )
        .where(CalibrationAnswer.set_id == set_id)
        .order_by(CalibrationAnswer.index)
    )
    return list(rows.scalars())
