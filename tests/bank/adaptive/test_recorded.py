"""Parsers of recorded responses (CSV) and items (JSONL): values and file:line: field errors."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from bank.adaptive.recorded import (
    STRATUM_FIELDS,
    ItemInfo,
    RecordedInputError,
    ResponseMatrix,
    check_coverage,
    load_items,
    load_responses,
    parse_items,
    parse_responses,
)


def _errors(exc: pytest.ExceptionInfo[RecordedInputError]) -> list[str]:
    return [str(problem) for problem in exc.value.errors]


# --------------------------------------------------------------------------- responses


def test_parse_responses_happy_path_with_empty_cells_as_nan() -> None:
    """Models in file order, item ids from the header, scores as floats (1, 0, fractions),
    NaN for an empty cell; surrounding spaces are ignored."""
    text = "model,q1,q2,q3\nalpha,1,0,\n beta ,0.5, ,1\n\ngamma,0,1,0.25\n"
    matrix = parse_responses(text, path="r.csv")
    assert matrix.models == ["alpha", "beta", "gamma"]
    assert matrix.item_ids == ["q1", "q2", "q3"]
    assert matrix.scores.shape == (3, 3)
    expected = np.array([[1, 0, np.nan], [0.5, np.nan, 1], [0, 1, 0.25]])
    np.testing.assert_array_equal(matrix.scores, expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("model,q1,q2\nm1,2,0\n", ["r.csv:2: q1: '2' is not a score in [0, 1] or empty"]),
        ("model,q1,q2\nm1,1,x\n", ["r.csv:2: q2: 'x' is not a score in [0, 1] or empty"]),
        ("model,q1\nm1,-0.5\n", ["r.csv:2: q1: '-0.5' is not a score in [0, 1] or empty"]),
        ("model,q1\nm1,nan\n", ["r.csv:2: q1: 'nan' is not a score in [0, 1] or empty"]),
        ("model,q1,q2\nm1,1\n", ["r.csv:2: csv: 2 cells, the header has 3"]),
        ("model,q1\nm1,1,0\n", ["r.csv:2: csv: 3 cells, the header has 2"]),
        ("model,q1\nm1,1\nm2,0\nm1,1\n", ["r.csv:4: model: 'm1' appears twice"]),
        ("model,q1\n,1\n", ["r.csv:2: model: empty model name"]),
        ("name,q1\nm1,1\n", ["r.csv:1: model: the first column must be 'model'"]),
        ("q1,model\nm1,1\n", ["r.csv:1: model: the first column must be 'model'"]),
        ("model,q1,q2,q1\nm1,1,0,1\n", ["r.csv:1: q1: item id appears twice in the header"]),
        ("", ["r.csv:1: file: no header row"]),
        ("model,q1\n", ["r.csv:2: file: no model rows"]),
        (
            'model,q1\n"m1\nstill m1",1\nm2,7\n',
            ["r.csv:4: q1: '7' is not a score in [0, 1] or empty"],
        ),
    ],
    ids=[
        "score-2",
        "score-x",
        "negative-score",
        "nan-score",
        "too-few-cells",
        "too-many-cells",
        "duplicate-model",
        "empty-model",
        "no-model-header",
        "model-not-first",
        "duplicate-item-id",
        "empty-file",
        "header-only",
        "line-after-multiline-cell",
    ],
)
def test_parse_responses_reports_each_problem_with_file_line_field(
    text: str, expected: list[str]
) -> None:
    """Every problem is reported as ``file:line: field: what`` with the physical line."""
    with pytest.raises(RecordedInputError) as exc:
        parse_responses(text, path="r.csv")
    assert _errors(exc) == expected


def test_parse_responses_reports_every_problem_at_once() -> None:
    """Problems on different lines and columns are collected, not just the first."""
    text = "model,q1,q2\nm1,2,x\nm2,1\nm1,0,1\nm3,1,1.5\n"
    with pytest.raises(RecordedInputError) as exc:
        parse_responses(text, path="r.csv")
    assert _errors(exc) == [
        "r.csv:2: q1: '2' is not a score in [0, 1] or empty",
        "r.csv:2: q2: 'x' is not a score in [0, 1] or empty",
        "r.csv:3: csv: 2 cells, the header has 3",
        "r.csv:4: model: 'm1' appears twice",
        "r.csv:5: q2: '1.5' is not a score in [0, 1] or empty",
    ]
    assert str(exc.value).splitlines() == _errors(exc)


def test_parse_responses_keeps_unicode_line_separators_inside_a_cell() -> None:
    """U+2028 in a model name is text, not a line break: rows and lines stay aligned."""
    text = "model,q1\nm\u2028one,1\nm2,0\nm3,9\n"
    with pytest.raises(RecordedInputError) as exc:
        parse_responses(text, path="r.csv")
    assert _errors(exc) == ["r.csv:4: q1: '9' is not a score in [0, 1] or empty"]
    matrix = parse_responses("model,q1\nm\u2028one,1\nm2,0\n")
    assert matrix.models == ["m\u2028one", "m2"]


def test_response_matrix_subset_reorders_and_fills_missing_columns_with_nan() -> None:
    """subset(ids) returns those columns in that order, NaN for ids it lacks."""
    matrix = parse_responses("model,q1,q2,q3\na,1,0,0.5\nb,0,1,\n")
    sub = matrix.subset(["q3", "zz", "q1"])
    assert sub.item_ids == ["q3", "zz", "q1"]
    assert sub.models == ["a", "b"]
    np.testing.assert_array_equal(sub.scores, np.array([[0.5, np.nan, 1], [np.nan, np.nan, 0]]))


# --------------------------------------------------------------------------- items


def _jsonl(*records: object) -> str:
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n"


def test_parse_items_happy_path_and_defaults() -> None:
    """question_id -> (category, src, type or qtype, default 'mc'); ids become strings."""
    text = _jsonl(
        {"question_id": 1, "category": "math", "src": "algebra", "type": "tf"},
        {"question_id": "q2", "category": "law", "qtype": "open"},
        {"question_id": "q3", "category": "law", "src": None},
    )
    items = parse_items(text, path="i.jsonl")
    assert items == {
        "1": ItemInfo("math", "algebra", "tf"),
        "q2": ItemInfo("law", "", "open"),
        "q3": ItemInfo("law", "", "mc"),
    }
    assert items["1"].stratum(STRATUM_FIELDS) == "math / algebra / tf"
    assert items["q2"].stratum(["discipline", "type"]) == "law / open"


def test_parse_items_does_not_split_a_line_on_u2028() -> None:
    """U+2028 / U+2029 / U+0085 inside a JSON string (legal JSON, written raw by
    ensure_ascii=False) keep the record whole, and later line numbers stay right."""
    text = (
        _jsonl(
            {"question_id": "a", "category": "bio", "question": "first\u2028second\u2029third\x85"},
            {"question_id": "b", "category": "chem"},
        )
        + '{"question_id": "c"}\n'
    )
    assert "\u2028" in text
    with pytest.raises(RecordedInputError) as exc:
        parse_items(text, path="i.jsonl")
    assert _errors(exc) == ["i.jsonl:3: category: missing"]
    items = parse_items(text.rsplit("\n", 2)[0] + "\n")
    assert set(items) == {"a", "b"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"question_id": "a", "category": "x"}\n{bad json\n', ["i.jsonl:2: json: "]),
        ("[1, 2]\n", ["i.jsonl:1: json: not an object"]),
        ('{"question_id": "a"}\n', ["i.jsonl:1: category: missing"]),
        ('{"question_id": "a", "category": ""}\n', ["i.jsonl:1: category: missing"]),
        ('{"category": "x"}\n', ["i.jsonl:1: question_id: missing"]),
        (
            '{"question_id": "a", "category": "x"}\n\n{"question_id": "a", "category": "y"}\n',
            ["i.jsonl:3: question_id: 'a' appears twice"],
        ),
        ("\n\n", ["i.jsonl:1: file: no items"]),
    ],
    ids=[
        "bad-json",
        "not-object",
        "no-category",
        "empty-category",
        "no-id",
        "duplicate-id",
        "empty",
    ],
)
def test_parse_items_reports_each_problem_with_file_line_field(
    text: str, expected: list[str]
) -> None:
    """Every problem is reported as ``file:line: field: what`` (blank lines counted)."""
    with pytest.raises(RecordedInputError) as exc:
        parse_items(text, path="i.jsonl")
    got = _errors(exc)
    assert len(got) == len(expected)
    for line, prefix in zip(got, expected, strict=True):
        assert line.startswith(prefix), (line, prefix)


def test_parse_items_reports_hostile_lines_as_problems() -> None:
    """Regression: deep nesting and huge numbers raised RecursionError / ValueError."""
    text = "\n".join(
        [
            '{"question_id": "a", "category": ' + "[" * 200_000 + "]" * 200_000 + "}",
            '{"question_id": ' + "9" * 5000 + ', "category": "x"}',
            '{"question_id": "b", "category": NaN}',
            '{"question_id": "c", "category": "x"}',
        ]
    )
    with pytest.raises(RecordedInputError) as exc:
        parse_items(text, path="i.jsonl")
    assert _errors(exc) == [
        "i.jsonl:1: json: nested deeper than 64 levels (column 97)",
        "i.jsonl:2: json: a number of 5000 characters (at most 100) (column 17)",
        "i.jsonl:3: json: NaN is not a JSON number (column 34)",
    ]


def test_parse_items_reports_every_problem_at_once() -> None:
    """A file with several bad lines lists them all, in order."""
    text = '{"question_id": 1}\n{oops\n"str"\n{"question_id": 2, "category": "c"}\n{}\n'
    with pytest.raises(RecordedInputError) as exc:
        parse_items(text, path="i.jsonl")
    fields = [(p.line, p.field) for p in exc.value.errors]
    assert fields == [
        (1, "category"),
        (2, "json"),
        (3, "json"),
        (5, "question_id"),
        (5, "category"),
    ]


# --------------------------------------------------------------------------- coverage / files


def _matrix(item_ids: list[str]) -> ResponseMatrix:
    return ResponseMatrix(["m1", "m2"], item_ids, np.zeros((2, len(item_ids))))


def test_check_coverage_accepts_described_items() -> None:
    """Every response column described by the items file: no error (extra items fine)."""
    items = {k: ItemInfo("d", "", "mc") for k in ("a", "b", "c")}
    check_coverage(_matrix(["a", "c"]), items, responses_path="r.csv", items_path="i.jsonl")


def test_check_coverage_names_the_unknown_item_ids() -> None:
    """Unknown columns are one error at the header line: count, file and the first five."""
    items = {"a": ItemInfo("d", "", "mc")}
    unknown = [f"x{i}" for i in range(7)]
    with pytest.raises(RecordedInputError) as exc:
        check_coverage(
            _matrix(["a", *unknown]), items, responses_path="r.csv", items_path="i.jsonl"
        )
    assert _errors(exc) == ["r.csv:1: x0: 7 item ids not in i.jsonl: x0, x1, x2, x3, x4 ..."]
    with pytest.raises(RecordedInputError) as exc:
        check_coverage(_matrix(["a", "zz"]), items, responses_path="r.csv", items_path="i.jsonl")
    assert _errors(exc) == ["r.csv:1: zz: 1 item ids not in i.jsonl: zz"]


def test_loaders_read_files_and_name_them_in_errors(tmp_path: Path) -> None:
    """load_responses / load_items read UTF-8 (a byte-order mark dropped) and report
    problems under the file's path."""
    responses = tmp_path / "responses.csv"
    responses.write_bytes("\ufeffmodel,q1\nm1,1\n".encode())
    items = tmp_path / "items.jsonl"
    items.write_text(_jsonl({"question_id": "q1", "category": "c", "q": "a\u2028b"}), "utf-8")
    matrix = load_responses(responses)
    assert matrix.models == ["m1"] and matrix.item_ids == ["q1"]
    assert load_items(items) == {"q1": ItemInfo("c", "", "mc")}
    bad = tmp_path / "bad.csv"
    bad.write_text("model,q1\nm1,5\n", "utf-8")
    with pytest.raises(RecordedInputError, match="^" + re.escape(f"{bad}:2: q1: ")):
        load_responses(bad)
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"question_id": "q1", "category": "c"}\n{"caf\xe9": 1}\n')
    with pytest.raises(RecordedInputError, match=r":2: file: not valid UTF-8"):
        load_items(latin)


def test_nan_is_only_for_empty_cells() -> None:
    """A parsed matrix holds NaN exactly where cells were empty."""
    matrix = parse_responses("model,a,b\nm1,,1\nm2,0,\n")
    assert [[math.isnan(v) for v in row] for row in matrix.scores] == [[True, False], [False, True]]
