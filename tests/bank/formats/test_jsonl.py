"""The canonical JSONL reader, format detection and ``read_records``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bank.bundled_datasets import sample_path
from bank.formats import FORMATS, detect_format, read_records
from bank.formats.jsonl import read_jsonl
from bank.records import RecordError, validate_record

ITEM = {
    "discipline": "Mathematics",
    "subdiscipline": "Algebra",
    "qtype": "multiple_choice",
    "question": "1 + 1 = ?",
    "options": ["1", "2", "3"],
    "answer": "B",
    "language": "en",
}


def _write(tmp_path: Path, text: str, name: str = "items.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def _error(path: Path) -> RecordError:
    with pytest.raises(RecordError) as caught:
        list(read_jsonl(path))
    return caught.value


def test_reads_objects_with_physical_line_numbers_skipping_blank_lines(tmp_path: Path) -> None:
    second = dict(ITEM, question="2 + 2 = ?", answer="4", qtype="fill_in")
    del second["options"]
    text = "\n".join(["", json.dumps(ITEM), "   ", "\t", json.dumps(second), ""])
    path = _write(tmp_path, text)

    records = list(read_jsonl(path))

    assert [record.location.line for record in records] == [2, 5]
    assert [record.location.path for record in records] == [str(path)] * 2
    assert records[0].data == ITEM
    assert records[1].data["question"] == "2 + 2 = ?"
    assert validate_record(records[0]).answer == "B"


def test_crlf_line_endings_and_a_byte_order_mark(tmp_path: Path) -> None:
    text = "\ufeff" + json.dumps(ITEM) + "\r\n\r\n" + json.dumps(ITEM) + "\r\n"
    records = list(read_jsonl(_write(tmp_path, text)))
    assert [record.location.line for record in records] == [1, 3]
    assert records[0].data == ITEM


def test_non_ascii_text_is_kept(tmp_path: Path) -> None:
    item = dict(ITEM, question="下列说法正确的是（ ）", language="zh")
    records = list(read_jsonl(_write(tmp_path, json.dumps(item, ensure_ascii=False) + "\n")))
    assert records[0].data["question"] == "下列说法正确的是（ ）"


def test_invalid_json_names_file_line_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, json.dumps(ITEM) + "\n\n" + '{"question": "x",\n')
    error = _error(path)
    assert str(error).startswith(f"{path}:3: json: ")
    assert "invalid JSON" in str(error)
    assert (error.location.line, error.field) == (3, "json")


@pytest.mark.parametrize(
    ("line", "kind"),
    [("[1, 2]", "an array"), ('"text"', "a string"), ("42", "a number"), ("null", "null")],
)
def test_a_line_that_is_not_an_object_is_an_error(tmp_path: Path, line: str, kind: str) -> None:
    path = _write(tmp_path, json.dumps(ITEM) + "\n" + line + "\n")
    error = _error(path)
    assert str(error) == f"{path}:2: json: expected a JSON object, got {kind}"


def test_invalid_utf8_is_an_error_on_its_line(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_bytes(json.dumps(ITEM).encode() + b'\n{"question": "\xff"}\n')
    assert str(_error(path)).startswith(f"{path}:2: json: not valid UTF-8")


def test_records_stop_at_the_first_error_lazily(tmp_path: Path) -> None:
    path = _write(tmp_path, json.dumps(ITEM) + "\nnot json\n")
    records = read_jsonl(path)
    assert next(records).location.line == 1
    with pytest.raises(RecordError, match=r":2: json: "):
        next(records)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b'{"a": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested deeper than 64 levels"),
        (b'{"discipline": ' + b"9" * 5000 + b"}", "a number of 5000 characters"),
        (b'{"discipline": NaN}', "NaN is not a JSON number"),
        (b'{"discipline": 1e999}', "number 1e999 is out of range"),
        (b'{"question": "a\x00b"}', "contains a NUL character"),
        (b'{"question": 1, \x00}', "contains a NUL character"),
        (b'{"question": "\xc3("}', "not valid UTF-8"),
    ],
    ids=["deep", "5000-digits", "nan", "overflow", "nul-in-string", "nul", "bad-utf8"],
)
def test_hostile_lines_are_errors_on_their_line(tmp_path: Path, line: bytes, problem: str) -> None:
    """Regression: RecursionError / int-limit ValueError escaped as tracebacks."""
    path = tmp_path / "items.jsonl"
    path.write_bytes(json.dumps(ITEM).encode() + b"\n" + line + b"\n")
    records = read_jsonl(path)
    assert next(records).location.line == 1
    with pytest.raises(RecordError) as caught:
        next(records)
    assert str(caught.value).startswith(f"{path}:2: json: {problem}")
    assert detect_format(path) == "jsonl"
    path.write_bytes(line + b"\n")  # as the first line, detection must not fail either
    assert detect_format(path) == "jsonl"


# --- detect_format / read_records ---------------------------------------------------


def test_formats_constant() -> None:
    assert FORMATS == ("jsonl", "gaokao", "mmlu_pro")


def test_detects_canonical_jsonl_and_mmlu_pro(tmp_path: Path) -> None:
    canonical = _write(tmp_path, "\n" + json.dumps(ITEM) + "\n")
    mmlu = _write(
        tmp_path, "\n" + json.dumps({"question_id": 1, "category": "math"}) + "\n", "m.jsonl"
    )
    broken = _write(tmp_path, "not json\n", "b.jsonl")
    assert detect_format(canonical) == "jsonl"
    assert detect_format(mmlu) == "mmlu_pro"
    assert detect_format(broken) == "jsonl"
    assert detect_format(sample_path("mmlu_pro")) == "mmlu_pro"


def test_detects_gaokao_directories_and_files(tmp_path: Path) -> None:
    gaokao = sample_path("gaokao_bench")
    assert detect_format(gaokao) == "gaokao"
    assert detect_format(gaokao / "Objective_Questions" / "2010-2022_Math_I_MCQs.json") == (
        "gaokao"
    )
    assert detect_format(tmp_path) == "gaokao"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("items.csv", "a,b\n", "cannot tell the format"),
        ("items.json", '{"items": []}', 'without a top-level "example"'),
        ("items.json", "{not json", "not valid JSON"),
        ("items.json", '{"example": ' + "[" * 100_000, r"items.json:1: json: nested deeper"),
    ],
)
def test_undetectable_formats_are_value_errors(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        detect_format(_write(tmp_path, content, name))


def test_missing_path_is_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such file"):
        detect_format(tmp_path / "nothing.jsonl")


def test_read_records_detects_or_obeys_the_format(tmp_path: Path) -> None:
    path = _write(tmp_path, json.dumps(ITEM) + "\n")
    assert [record.data for record in read_records(path)] == [ITEM]
    assert [record.data for record in read_records(path, "jsonl")] == [ITEM]
    with pytest.raises(ValueError, match="unknown format 'csv'"):
        read_records(path, "csv")
    first = next(read_records(sample_path("mmlu_pro")))
    assert first.data["source"] == "MMLU-Pro"
