"""Augmentation of multiple-choice items (LLMEval-Fair §2.1, app. A.2.2, fig. 7).

A multiple-choice item with n options yields n true/false items ("Is it correct to place
the answer "X" in the provided space?") and one fill-in item whose answer is the correct
option's text. Variants share the original's ``family_id`` and get deterministic ids
(uuid5 of the parent id and the variant name), so re-importing is stable.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from bank.records import OPTION_LETTERS, ItemRecord

TRUE_FALSE_PROMPT = {
    "zh": "{stem}\n\n将答案“{option}”填入题中空白处是否正确？",
    "en": '{stem}\n\nIs it correct to place the answer "{option}" in the provided space?',
}
FILL_IN_PROMPT = {
    "zh": "{stem}\n\n请直接写出应填入空白处的答案。",
    "en": "{stem}\n\nWrite the answer that belongs in the provided space.",
}
TRUE_FALSE_ANSWERS = {"zh": ("正确", "错误"), "en": ("True", "False")}


@dataclass(frozen=True, slots=True)
class Variant:
    """An augmented item derived from a multiple-choice parent."""

    id: uuid.UUID
    variant: str
    qtype: str
    question: str
    answer: str


def variant_id(parent_id: uuid.UUID, variant: str) -> uuid.UUID:
    """The deterministic id of ``variant`` of ``parent_id``."""
    return uuid.uuid5(parent_id, variant)


def _language(record: ItemRecord) -> str:
    return "zh" if record.language.lower().startswith("zh") else "en"


def augment(record: ItemRecord, parent_id: uuid.UUID) -> list[Variant]:
    """Return the true/false and fill-in variants of a multiple-choice ``record``.

    Items of any other type yield no variants.
    """
    if record.qtype != "multiple_choice" or not record.options:
        return []
    lang = _language(record)
    correct = OPTION_LETTERS.index(record.answer)
    yes, no = TRUE_FALSE_ANSWERS[lang]
    variants = [
        Variant(
            id=variant_id(parent_id, f"true_false:{index}"),
            variant=f"true_false:{index}",
            qtype="true_false",
            question=TRUE_FALSE_PROMPT[lang].format(stem=record.question, option=option),
            answer=yes if index == correct else no,
        )
        for index, option in enumerate(record.options)
    ]
    variants.append(
        Variant(
            id=variant_id(parent_id, "fill_in"),
            variant="fill_in",
            qtype="fill_in",
            question=FILL_IN_PROMPT[lang].format(stem=record.question),
            answer=record.options[correct],
        )
    )
    return variants
