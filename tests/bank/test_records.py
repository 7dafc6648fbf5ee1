"""Validation of canonical records: every refusal names the field and says what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from bank.records import RawRecord, RecordError, SourceLocation, validate_record
from tests.support.factories import mc_record, open_record


def check(data: dict[str, Any]) -> Any:
    return validate_record(RawRecord(SourceLocation("f.jsonl", 7), data))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            mc_record(0, options=["only one"]),
            "f.jsonl:7: options: 1 options; multiple_choice needs",
        ),
        (mc_record(0, options=[str(i) for i in range(27)]), "f.jsonl:7: options: 27 options"),
        (mc_record(0, options=["a", "a", "b"]), "f.jsonl:7: options: two options have the same"),
        (mc_record(0, answer="E"), "f.jsonl:7: answer: 'E' is not among the 4 options (A-D)"),
        (mc_record(0, answer="seven"), "f.jsonl:7: answer: 'seven' is neither an option letter"),
        ({**mc_record(0), "options": None}, "f.jsonl:7: options: required for multiple_choice"),
        (open_record(0, options=["a", "b"]), "f.jsonl:7: options: only multiple_choice has"),
        (open_record(0, qtype="poem"), "f.jsonl:7: qtype: 'poem' is not one of"),
        (open_record(0, id="not-a-uuid"), "f.jsonl:7: id: 'not-a-uuid' is not a UUID"),
        ({**open_record(0), "colour": "red"}, "f.jsonl:7: colour: unknown field"),
        (
            {k: v for k, v in open_record(0).items() if k != "discipline"},
            "f.jsonl:7: discipline: required field is missing or empty",
        ),
        (open_record(0, answer=["a"]), "f.jsonl:7: answer: must be a string, got list"),
        (mc_record(0, options=["a", "", "c"]), "f.jsonl:7: options[1]: is empty"),
    ],
)
def test_bad_records_are_refused_with_file_line_and_field(
    data: dict[str, Any], expected: str
) -> None:
    with pytest.raises(RecordError) as refused:
        check(data)
    assert str(refused.value).startswith(expected)


def test_a_multiple_choice_answer_may_be_the_option_text_and_is_stored_as_its_letter() -> None:
    record = check(mc_record(0, options=["red", "green", "blue"], answer="blue"))
    assert record.answer == "C"
    assert check(mc_record(0, answer="b.")).answer == "B"


def test_defaults_and_trimming() -> None:
    record = check({**open_record(0, question="  Why?  "), "language": None})
    assert record.question == "Why?"
    assert record.language == "zh"
    assert record.options is None
