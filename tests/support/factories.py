"""Typed factories for test data: canonical records, JSONL files, organisations, banks."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from bank.importer import ImportReport, import_records
from bank.records import RawRecord, SourceLocation
from server.orgs.models import Organisation
from server.orgs.service import create_org


def mc_record(index: int, **overrides: Any) -> dict[str, Any]:
    """A valid canonical multiple-choice record, distinct for every ``index``."""
    return {
        "discipline": "Science",
        "subdiscipline": "Algebra",
        "qtype": "multiple_choice",
        "question": f"Question {index}: what is {index} + {index * 7 + 3}?",
        "options": [str(index * 8 + 3), str(index * 8 + 4), str(index * 8 + 5), "none"],
        "answer": "A",
        "explanation": "Add the numbers.",
        "source": "unit test",
        "language": "en",
        **overrides,
    }


def open_record(index: int, **overrides: Any) -> dict[str, Any]:
    """A valid canonical short-answer record."""
    return {
        "discipline": "History",
        "subdiscipline": "Modern",
        "qtype": "short_answer",
        "question": f"Explain event number {index} and its causes in detail.",
        "answer": f"Reference answer {index}.",
        **overrides,
    }


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> Path:
    """Write ``records`` as canonical JSONL, one per line."""
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )
    return path


def raw_records(records: Iterable[dict[str, Any]], path: str = "test.jsonl") -> list[RawRecord]:
    """Canonical dicts as ``RawRecord`` s numbered from line 1."""
    return [RawRecord(SourceLocation(path, i), r) for i, r in enumerate(records, start=1)]


async def make_org(
    session: AsyncSession, name: str | None = None, *, operator: bool = False
) -> Organisation:
    """A new organisation with a unique name (the operator's if ``operator``)."""
    return await create_org(session, name=name or f"org-{uuid.uuid4().hex[:8]}", operator=operator)


async def make_bank(
    session: AsyncSession,
    *,
    disciplines: int,
    qtypes: Iterable[str],
    subdisciplines: int,
    per_cell: int,
    augment: bool = False,
) -> ImportReport:
    """A synthetic bank: ``per_cell`` distinct items in every discipline/type/sub cell."""
    records = []
    qtype_list = list(qtypes)
    for d in range(disciplines):
        for t in qtype_list:
            for s in range(subdisciplines):
                for i in range(per_cell):
                    tag = f"{d}-{t}-{s}-{i}"
                    base = mc_record(i) if t == "multiple_choice" else open_record(i, qtype=t)
                    base.update(
                        discipline=f"d{d}",
                        subdiscipline=f"S{s}",
                        question=f"[{tag}] unique question {uuid.uuid4().hex}",
                    )
                    records.append(base)
    return await import_records(
        session, raw_records(records), augment=augment, add_disciplines=True
    )
