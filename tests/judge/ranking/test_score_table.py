"""Reading a model-by-dimension score table (``proctor analyze``'s input)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from judge.ranking.score_table import (
    NO_ABSOLUTE,
    TableInputError,
    parse_score_table,
    sniff_delimiter,
)
from tests.judge.ranking.table8 import DISCIPLINES, TABLE8, load_table8


def problems(text: str, name: str = "t.csv", **kwargs: Any) -> list[str]:
    with pytest.raises(TableInputError) as caught:
        parse_score_table(text, name=name, **kwargs)
    return [str(p) for p in caught.value.errors]


def test_table8_is_read_with_its_known_columns() -> None:
    table = parse_score_table(TABLE8.read_text(encoding="utf-8"), name=str(TABLE8))
    reference = load_table8()
    assert table.model_column == "model"
    assert table.absolute_column == "S_abs"
    assert table.ignored_columns == ("access", "ref_year", "R_sota")
    assert table.matrix.dimensions == DISCIPLINES
    assert list(table.matrix.models) == reference.models
    assert np.array_equal(table.matrix.scores, reference.disciplines)
    assert list(table.overall().values()) == reference.s_abs.tolist()
    assert table.lines["DeepSeek-R1"] == 2


def test_defaults_and_overrides() -> None:
    text = "name,Overall,math,law,notes\nA,80,8,9,x\nB,70,7,6,y\n"
    table = parse_score_table(text, name="t.csv", dimensions=["math", "law"])
    assert table.model_column == "name"  # the first non-numeric column
    assert table.absolute_column == "Overall"  # any case
    assert table.ignored_columns == ("notes",)
    assert table.overall() == {"A": 80.0, "B": 70.0}
    without = parse_score_table(
        text, name="t.csv", dimensions=["law", "math"], absolute_column=NO_ABSOLUTE
    )
    assert without.overall_source == "mean of dimensions"
    assert without.overall() == {"A": 8.5, "B": 6.5}
    assert without.matrix.dimensions == ("law", "math")
    by_name = parse_score_table(text, name="t.csv", dimensions=["law"], model_column="notes")
    assert by_name.matrix.models == ("x", "y")


def test_delimiters() -> None:
    assert sniff_delimiter("a.TSV", "a,b") == "\t"
    assert sniff_delimiter("a.csv", "a\tb") == ","
    assert sniff_delimiter("a.txt", "model;x;y\nA;1;2\nB;3;4\n") == ";"
    assert sniff_delimiter("a.txt", "model\tx\tlong name\nA\t1\t2\n") == "\t"
    table = parse_score_table("\ufeffmodel;x;y\n\nA;1;2\nB;3;4\n", name="scores")
    assert table.matrix.scores.tolist() == [[1, 2], [3, 4]]
    assert table.lines == {"A": 3, "B": 4}


def test_every_problem_is_reported_with_its_line_and_column() -> None:
    text = "model,x,y\nA,1,oops\nB,,2\nA,3,inf\nC,1\n"
    assert problems(text) == ["t.csv:5: row: has 2 fields, the header has 3"]
    assert problems(text.replace("C,1\n", "")) == [
        "t.csv:4: model: model 'A' is listed twice (line 2)",
        "t.csv:3: x: is empty; expected a number",
        "t.csv:2: y: 'oops' is not a number",
        "t.csv:4: y: 'inf' is not a finite number",
    ]


@pytest.mark.parametrize(
    ("text", "kwargs", "expected"),
    [
        ("", {}, "t.csv: file: is empty; expected a header row and one row per model"),
        ("model,x\n", {}, "t.csv:1: file: has a header but no models"),
        ("model,x,x\nA,1,2\n", {}, "t.csv:1: x: appears twice in the header"),
        ("model,,y\nA,1,2\n", {}, "t.csv:1: column 2: has no name in the header"),
        ("a,b\n1,2\n", {}, "t.csv:1: model: no model column"),
        ("model,R_sota\nA,1\n", {}, "t.csv:1: dimensions: the table has no dimension columns"),
        ("model,x\nA,1\n", {"dimensions": ["z"]}, "t.csv:1: z: dimension column not found"),
        ("model,x\nA,1\n", {"dimensions": ["model"]}, "t.csv:1: model: is the model column"),
        ("model,x\nA,1\n", {"model_column": "who"}, "t.csv:1: who: model column not found"),
        ("model,x\nA,1\n", {"absolute_column": "S"}, "t.csv:1: S: absolute-score column not"),
        ("model,x\n,1\n", {}, "t.csv:2: model: the model name is empty"),
    ],
)
def test_bad_tables(text: str, kwargs: dict[str, Any], expected: str) -> None:
    assert problems(text, **kwargs)[0].startswith(expected)
