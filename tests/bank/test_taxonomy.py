"""The discipline taxonomy: canonical keys, the default taxonomy, source maps and map files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bank.bundled_datasets import sample_path
from bank.formats import read_records
from bank.formats.discipline_maps import load_discipline_map, shipped_map
from bank.formats.gaokao import read_gaokao
from bank.formats.mmlu_pro import read_mmlu_pro
from bank.taxonomy import (
    DEFAULT_TAXONOMY,
    DisciplineMap,
    MapFileError,
    canonical_key,
    parse_discipline_map,
)
from tests.judge.ranking.table8 import DISCIPLINES as TABLE8

KEYS = {d.key for d in DEFAULT_TAXONOMY}


def _spelled(name: str, flips: list[bool], pads: tuple[str, str], gaps: list[str]) -> str:
    letters = [c.upper() if up else c.lower() for c, up in zip(name, flips, strict=False)]
    text = "".join(letters) + name[len(letters) :]
    words = text.split(" ")
    joined = words[0]
    for i, word in enumerate(words[1:]):
        joined += (gaps[i] if i < len(gaps) else " ") + word
    return pads[0] + joined + pads[1]


spaces = st.sampled_from([" ", "  ", "\t", "_", "-", " - ", "\u3000"])


@given(
    name=st.sampled_from(
        [n for d in DEFAULT_TAXONOMY for n in (d.key, d.display_name, *d.aliases)]
        + ["computer science", "Political Science"]
    ),
    flips=st.lists(st.booleans(), max_size=30),
    pads=st.tuples(st.sampled_from(["", " ", "\t", "\n "]), st.sampled_from(["", " ", " \n"])),
    gaps=st.lists(spaces, max_size=5),
)
def test_any_casing_or_spacing_of_a_name_has_one_key(
    name: str, flips: list[bool], pads: tuple[str, str], gaps: list[str]
) -> None:
    spelled = _spelled(name, flips, pads, gaps)
    assert canonical_key(spelled) == canonical_key(name)
    aliases = DisciplineMap.aliases()
    assert canonical_key(aliases.apply(spelled).discipline) == canonical_key(
        aliases.apply(name).discipline
    )


def test_the_default_taxonomy_is_the_papers() -> None:
    assert len(DEFAULT_TAXONOMY) == 13
    evaluated = [d.display_name for d in DEFAULT_TAXONOMY if d.evaluated]
    assert evaluated == list(TABLE8)  # the ten columns of table 8, in its order
    assert KEYS - {canonical_key(n) for n in TABLE8} == {"philosophy", "agronomy", "arts"}
    aliases = DisciplineMap.aliases()
    for name, key in (
        ("Military Science", "military"),
        ("理学", "science"),
        ("Mgmt.", "management"),
    ):
        assert aliases.apply(name).discipline == key


@pytest.mark.parametrize(
    ("fmt", "records"),
    [
        ("mmlu_pro", lambda: read_mmlu_pro(sample_path("mmlu_pro"))),
        ("gaokao", lambda: read_gaokao(sample_path("gaokao_bench"))),
    ],
)
def test_the_shipped_maps_cover_every_category_of_the_bundled_data(fmt, records) -> None:  # type: ignore[no-untyped-def]
    mapping = shipped_map(fmt)
    categories = {r.data["discipline"] for r in records()}
    assert len(categories) == (14 if fmt == "mmlu_pro" else 9)
    targets = {mapping.apply(c).discipline for c in categories}
    assert all(canonical_key(c) in mapping.targets for c in categories)
    assert targets <= KEYS


def test_read_records_files_categories_under_the_taxonomy_keeping_the_subject() -> None:
    gaokao = list(read_records(sample_path("gaokao_bench")))
    biology = [r for r in gaokao if r.location.path.endswith("Biology_MCQs.json")]
    assert {r.data["discipline"] for r in biology} == {"science"}
    assert {r.data["subdiscipline"] for r in biology} == {"Biology / Multiple Choice"}
    history = [r for r in gaokao if r.location.path.endswith("History_MCQs.json")]
    assert {r.data["subdiscipline"] for r in history} == {"Multiple Choice"}  # not renamed
    mmlu = list(read_records(sample_path("mmlu_pro")))
    assert {r.data["discipline"] for r in mmlu} <= KEYS


def test_an_operator_map_overrides_the_shipped_one(tmp_path: Path) -> None:
    path = tmp_path / "map.csv"
    path.write_text("# ours\nsource,discipline\nBiology,Life Sciences\n", encoding="utf-8")
    records = read_records(sample_path("gaokao_bench"), None, load_discipline_map(path))
    biology = {r.data["discipline"] for r in records if "Biology" in r.location.path}
    assert biology == {"Life Sciences"}


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("", "map.csv:1: header: expected source,discipline"),
        ("from,to\n", "map.csv:1: header: expected source,discipline"),
        ("source,discipline\nbiology\n", "map.csv:2: row: expected 2 columns, got 1"),
        ("source,discipline\n\n# c\nbiology,science,x\n", "map.csv:4: row: expected 2 columns"),
        ("source,discipline\nbiology, \n", "map.csv:2: discipline: empty"),
        ("source,discipline\n" + "x" * 101 + ",law\n", "map.csv:2: source: longer than 100"),
        ("source,discipline\nbiology,law\nBIOLOGY,science\n", "map.csv:3: source: 'BIOLOGY' is"),
        ("source,discipline\n---,law\n", "map.csv:2: source: '---' is not a discipline name"),
        ('source,discipline\n"biology,law\n', "map.csv:"),
    ],
)
def test_a_malformed_map_names_file_line_and_field(text: str, where: str) -> None:
    with pytest.raises(MapFileError) as caught:
        parse_discipline_map(text, "map.csv")
    assert str(caught.value).startswith(where)


def test_a_map_file_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "map.csv"
    path.write_bytes(b"source,discipline\nbiology,science\n\xff,law\n")
    with pytest.raises(MapFileError, match=r"map.csv:3: file: not valid UTF-8"):
        load_discipline_map(path)
