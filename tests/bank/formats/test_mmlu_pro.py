"""The MMLU-Pro reader on the shipped sample, the full real set and bad input."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bank.bundled_datasets import sample_path
from bank.formats.mmlu_pro import NAMESPACE, drop_padding, read_mmlu_pro
from bank.records import RecordError, validate_record
from tests.support.paths import SHARED_DATA

FULL = SHARED_DATA / "mmlu_pro" / "items.jsonl"
needs_full_data = pytest.mark.skipif(
    not FULL.exists(), reason=f"real data set {FULL} is absent (shared data not mounted)"
)
CATEGORIES = 14

ITEM: dict[str, Any] = {
    "question_id": 7,
    "category": "physics",
    "src": "stemez-Physics",
    "question": "Which is largest?",
    "options": ["1", "2", "3", "N/A", "N/A"],
    "answer": "C",
    "answer_index": 2,
}


def _write(tmp_path: Path, *items: dict[str, Any]) -> Path:
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


def test_sample_has_forty_items_per_category_and_all_validate() -> None:
    records = list(read_mmlu_pro(sample_path("mmlu_pro")))
    assert len(records) == 40 * CATEGORIES
    assert set(Counter(record.data["discipline"] for record in records).values()) == {40}
    items = [validate_record(record) for record in records]
    assert {item.qtype for item in items} == {"multiple_choice"}
    assert {(item.language, item.source) for item in items} == {("en", "MMLU-Pro")}
    assert len({item.id for item in items}) == len(items)


def test_first_sample_item_is_mapped_field_by_field() -> None:
    path = sample_path("mmlu_pro")
    record = next(read_mmlu_pro(path))
    assert record.location.line == 1
    assert record.data == {
        "id": str(uuid.uuid5(NAMESPACE, "mmlu_pro:70")),
        "discipline": "business",
        "subdiscipline": "ori mmlu-business ethics",
        "qtype": "multiple_choice",
        "question": (
            "Typical advertising regulatory bodies suggest, for example that adverts must "
            "not: encourage _________, cause unnecessary ________ or _____, and must not "
            "cause _______ offence."
        ),
        "options": [
            "Safe practices, Fear, Jealousy, Trivial",
            "Unsafe practices, Distress, Joy, Trivial",
            "Safe practices, Wants, Jealousy, Trivial",
            "Safe practices, Distress, Fear, Trivial",
            "Unsafe practices, Wants, Jealousy, Serious",
            "Safe practices, Distress, Jealousy, Serious",
            "Safe practices, Wants, Fear, Serious",
            "Unsafe practices, Wants, Fear, Trivial",
            "Unsafe practices, Distress, Fear, Serious",
        ],
        "answer": "I",
        "source": "MMLU-Pro",
        "language": "en",
    }
    item = validate_record(record)
    assert item.options is not None
    assert item.options[ord(item.answer) - ord("A")] == "Unsafe practices, Distress, Fear, Serious"


def test_ids_are_stable_across_reads() -> None:
    path = sample_path("mmlu_pro")
    first = [record.data["id"] for record in read_mmlu_pro(path)]
    assert first == [record.data["id"] for record in read_mmlu_pro(path)]


def test_na_padding_after_the_answer_is_dropped(tmp_path: Path) -> None:
    record = next(read_mmlu_pro(_write(tmp_path, ITEM)))
    assert record.data["options"] == ["1", "2", "3"]
    assert validate_record(record).answer == "C"


def test_na_padding_before_the_answer_is_kept() -> None:
    assert drop_padding(["N/A", "1", "2"], 2) == ["N/A", "1", "2"]
    assert drop_padding(["1", "N/A", "2", "N/A"], 2) == ["1", "N/A", "2", "N/A"]
    assert drop_padding(["1", "N/A"], 1) == ["1", "N/A"]
    assert drop_padding(["1", "2", " N/A"], 0) == ["1", "2", " N/A"]  # only exact "N/A"


def test_answer_letter_must_match_answer_index(tmp_path: Path) -> None:
    path = _write(tmp_path, dict(ITEM, question_id=1), dict(ITEM, answer="B"))
    with pytest.raises(RecordError) as caught:
        list(read_mmlu_pro(path))
    assert str(caught.value).startswith(f"{path}:2: answer: 'B' does not match answer_index 2")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"question_id": None}, "question_id"),
        ({"options": "A, B"}, "options"),
        ({"answer_index": 5}, "answer_index"),
        ({"answer_index": "2"}, "answer_index"),
        ({"answer_index": True}, "answer_index"),
    ],
)
def test_malformed_items_name_the_field(tmp_path: Path, change: dict[str, Any], field: str) -> None:
    item = {key: value for key, value in {**ITEM, **change}.items() if value is not None}
    path = _write(tmp_path, item)
    with pytest.raises(RecordError) as caught:
        list(read_mmlu_pro(path))
    assert str(caught.value).startswith(f"{path}:1: {field}: ")


def test_a_line_that_is_not_json_is_a_json_error(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps(ITEM) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(RecordError) as caught:
        list(read_mmlu_pro(path))
    assert str(caught.value).startswith(f"{path}:2: json: ")


def test_bad_canonical_values_are_left_to_validation(tmp_path: Path) -> None:
    record = next(read_mmlu_pro(_write(tmp_path, dict(ITEM, category=""))))
    with pytest.raises(RecordError) as caught:
        validate_record(record)
    assert str(caught.value).startswith(f"{tmp_path / 'items.jsonl'}:1: discipline: ")


@needs_full_data
def test_full_data_set_reads_and_validates() -> None:
    records = list(read_mmlu_pro(FULL))
    assert len(records) == 12_032
    items = [validate_record(record) for record in records]
    assert len({item.id for item in items}) == 12_032
    assert len({item.discipline for item in items}) == CATEGORIES
    assert len({item.subdiscipline for item in items}) == 91
    assert [record.location.line for record in records] == list(range(1, 12_033))
