"""The GAOKAO-Bench reader: option parsing, mapping, line numbers, errors, real data."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from bank.bundled_datasets import sample_path
from bank.formats import read_records
from bank.formats.gaokao import (
    FILE_KINDS,
    NAMESPACE,
    GaokaoStats,
    file_kind,
    read_gaokao,
    split_options,
)
from bank.records import RawRecord, RecordError, validate_record
from tests.support.paths import SHARED_DATA

FULL = SHARED_DATA / "gaokao_bench"
needs_full_data = pytest.mark.skipif(
    not FULL.exists(), reason=f"real data set {FULL} is absent (shared data not mounted)"
)
SAMPLE = sample_path("gaokao_bench")
OBJECTIVE = SAMPLE / "Objective_Questions"
SUBJECTIVE = SAMPLE / "Subjective_Questions"

# file name without the year prefix -> (discipline, subdiscipline, qtypes its items get)
EXPECTED_MAPPING: dict[str, tuple[str, str, set[str]]] = {
    "English_MCQs": ("English", "Grammar and Vocabulary", {"multiple_choice"}),
    "Biology_MCQs": ("Biology", "Multiple Choice", {"multiple_choice"}),
    "Chemistry_MCQs": ("Chemistry", "Multiple Choice", {"multiple_choice"}),
    "Chinese_Lang_and_Usage_MCQs": ("Chinese", "Language and Usage", {"multiple_choice"}),
    "Chinese_Modern_Lit": ("Chinese", "Modern Literature", {"reading_comprehension"}),
    "English_Fill_in_Blanks": ("English", "Cloze", {"cloze"}),
    "English_Reading_Comp": ("English", "Reading Comprehension", {"reading_comprehension"}),
    "Geography_MCQs": ("Geography", "Multiple Choice", {"reading_comprehension"}),
    "History_MCQs": ("History", "Multiple Choice", {"multiple_choice"}),
    "Math_I_MCQs": ("Mathematics", "Math I", {"multiple_choice"}),
    "Math_II_MCQs": ("Mathematics", "Math II", {"multiple_choice", "reading_comprehension"}),
    "Physics_MCQs": ("Physics", "Multiple Choice", {"multiple_choice", "reading_comprehension"}),
    "Political_Science_MCQs": ("Political Science", "Multiple Choice", {"multiple_choice"}),
    "English_Cloze_Test": ("English", "Seven-Option Cloze", {"cloze"}),
    "Biology_Open-ended_Questions": ("Biology", "Open-ended Questions", {"short_answer"}),
    "Chemistry_Open-ended_Questions": ("Chemistry", "Open-ended Questions", {"short_answer"}),
    "Chinese_Language_Ancient_Poetry_Reading": (
        "Chinese",
        "Ancient Poetry Reading",
        {"short_answer"},
    ),
    "Chinese_Language_Classical_Chinese_Reading": (
        "Chinese",
        "Classical Chinese Reading",
        {"short_answer"},
    ),
    "Chinese_Language_Famous_Passages_and_Sentences_Dictation": (
        "Chinese",
        "Famous Passages and Sentences",
        {"dictation"},
    ),
    "Chinese_Language_Language_and_Writing_Skills_Open-ended_Questions": (
        "Chinese",
        "Language and Writing Skills",
        {"short_answer"},
    ),
    "Chinese_Language_Literary_Text_Reading": (
        "Chinese",
        "Literary Text Reading",
        {"short_answer"},
    ),
    "Chinese_Language_Practical_Text_Reading": (
        "Chinese",
        "Practical Text Reading",
        {"short_answer"},
    ),
    "Geography_Open-ended_Questions": ("Geography", "Open-ended Questions", {"short_answer"}),
    "History_Open-ended_Questions": ("History", "Open-ended Questions", {"short_answer"}),
    "Math_I_Fill-in-the-Blank": ("Mathematics", "Math I", {"fill_in"}),
    "Math_I_Open-ended_Questions": ("Mathematics", "Math I", {"calculation"}),
    "Math_II_Fill-in-the-Blank": ("Mathematics", "Math II", {"fill_in"}),
    "Math_II_Open-ended_Questions": ("Mathematics", "Math II", {"calculation"}),
    "Physics_Open-ended_Questions": ("Physics", "Open-ended Questions", {"short_answer"}),
    "Political_Science_Open-ended_Questions": (
        "Political Science",
        "Open-ended Questions",
        {"short_answer"},
    ),
    "English_Language_Error_Correction": ("English", "Error Correction", {"error_correction"}),
    "English_Language_Cloze_Passage": ("English", "Grammar Cloze Passage", {"cloze"}),
}


def _by_index(path: Path) -> dict[int, RawRecord]:
    """Records of one file keyed by the item's ``index`` (recovered from the id)."""
    records = list(read_gaokao(path))
    document = json.loads(path.read_text(encoding="utf-8"))
    indexes = [item["index"] for item in document["example"]]
    assert len(records) == len(indexes)
    for record, index in zip(records, indexes, strict=True):
        assert record.data["id"] == str(uuid.uuid5(NAMESPACE, f"gaokao:{path.stem}:{index}"))
    return dict(zip(indexes, records, strict=True))


def _item(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "year": "2010",
        "category": "（新课标）",
        "question": "1．题目（ ）A．1 B．2 C．3 D．4",
        "answer": ["B"],
        "analysis": "解析",
        "index": 0,
        "score": 5,
    }
    base.update(fields)
    return {key: value for key, value in base.items() if value is not None}


def _write(directory: Path, items: list[Any], name: str = "2010-2022_Math_I_MCQs.json") -> Path:
    path = directory / name
    document = {"keywords": path.stem, "example": items}
    path.write_text(json.dumps(document, ensure_ascii=False, indent=4), encoding="utf-8")
    return path


def _error(path: Path) -> RecordError:
    with pytest.raises(RecordError) as caught:
        list(read_gaokao(path))
    return caught.value


# --- split_options ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "stem", "options"),
    [
        ("题（ ）\nA．甲\nB．乙\nC．丙\nD．丁\n", "题（ ）", ["甲", "乙", "丙", "丁"]),
        ("Q?\nA. one\nB. two\nC. three", "Q?", ["one", "two", "three"]),
        ("题 A、甲 B、乙", "题", ["甲", "乙"]),
        ("题 (A) 甲 (B) 乙 （C）丙", "题", ["甲", "乙", "丙"]),
        (
            "题 A．80，84 B．84，80 C．84.64  D．84，100",
            "题",
            ["80，84", "84，80", "84.64", "84，100"],
        ),
        # PDF extraction glues a marker to the previous option
        ("题\nA．甲\nB．乙增加C．丙\nD．丁", "题", ["甲", "乙增加", "丙", "丁"]),
        ("题 A.甲 B.升高4C.丙 D.丁", "题", ["甲", "升高4", "丙", "丁"]),
        # an "A、B" inside the stem does not start the options
        (
            "将大鼠分为 A、B两组，A组除去淋巴细胞（ ）\nA．x\nB．y",
            "将大鼠分为 A、B两组，A组除去淋巴细胞（ ）",
            ["x", "y"],
        ),
        # "DNA." and TeX letters are not markers
        (
            "含 DNA. 的是 $\\mathrm{A}$. 哪个\nA．RNA.\nB．蛋白",
            "含 DNA. 的是 $\\mathrm{A}$. 哪个",
            ["RNA.", "蛋白"],
        ),
    ],
)
def test_split_options_parses(question: str, stem: str, options: list[str]) -> None:
    assert split_options(question) == (stem, options)


@pytest.mark.parametrize(
    "question",
    [
        "题（ ）\nA．  B．  \nC．  D．",  # options were pictures
        "题\nA．甲 B．乙 C．乙 D．丁",  # two options with the same text
        "题\nA．甲",  # a single option
        "题\nB．乙 C．丙 D．丁",  # does not start at A
        "A．甲 B．乙",  # no stem
        "没有选项的题目",
    ],
)
def test_split_options_refuses_to_guess(question: str) -> None:
    assert split_options(question) is None


# --- real items (shipped sample) ----------------------------------------------------


def test_real_math_item_options_and_answer() -> None:
    record = _by_index(OBJECTIVE / "2010-2022_Math_I_MCQs.json")[0]
    assert record.data["qtype"] == "multiple_choice"
    assert record.data["question"].startswith("1. （5 分) 已知集合 $A=")
    assert record.data["question"].endswith("则 $A \\cap B=(\\quad$ ）")
    assert record.data["options"] == ["$(0,2)$", "$[0,2]$", "$\\{0,2\\}$", "$\\{0,1,2\\}$"]
    assert record.data["answer"] == "D"
    assert record.data["source"] == "GAOKAO 2010 （新课标）"
    assert record.data["language"] == "zh"
    assert record.data["explanation"].startswith("解: $A=")


def test_real_same_line_full_width_options() -> None:
    history = _by_index(OBJECTIVE / "2010-2022_History_MCQs.json")[0]
    assert history.data["options"] == ["河南、河北", "湖南、湖北", "山东、山西", "广东、广西"]
    assert history.data["answer"] == "C"
    politics = _by_index(OBJECTIVE / "2010-2022_Political_Science_MCQs.json")[0]
    assert politics.data["options"] == ["80，84", "84，80", "84.64", "84，100"]
    assert politics.data["question"].endswith("分别为（ \u3000\u3000）")


def test_real_biology_item_with_dna_in_an_option() -> None:
    record = _by_index(OBJECTIVE / "2010-2022_Biology_MCQs.json")[0]
    assert record.data["options"] == [
        "病毒是一类具有细胞结构的生物",
        "蓝藻细胞具有细胞核且 DNA分子呈环状",
        "人体所有细胞的细胞周期持续时间相同",
        "内质网膜和高尔基体膜都具有流动性",
    ]
    assert record.data["answer"] == "D"


def test_real_english_item_is_english() -> None:
    record = _by_index(OBJECTIVE / "2010-2013_English_MCQs.json")[0]
    assert record.data["options"] == ["was doing", "would  do", "had done", "do"]
    assert record.data["answer"] == "A"
    assert record.data["language"] == "en"
    assert record.data["subdiscipline"] == "Grammar and Vocabulary"


def test_real_item_with_lost_options_is_kept_whole_not_guessed() -> None:
    """Math II index 7: options C and D have the same text in the source."""
    path = OBJECTIVE / "2010-2022_Math_II_MCQs.json"
    source = json.loads(path.read_text(encoding="utf-8"))["example"][7]
    record = _by_index(path)[7]
    assert record.data["qtype"] == "reading_comprehension"
    assert record.data["question"] == source["question"].strip()
    assert record.data["answer"] == "A"
    assert "options" not in record.data
    assert validate_record(record).answer == "A"


def test_real_multi_answer_items() -> None:
    geography = _by_index(OBJECTIVE / "2010-2022_Geography_MCQs.json")[0]
    assert geography.data["qtype"] == "reading_comprehension"
    assert geography.data["answer"] == "1. B; 2. C"
    assert "A．避免自然灾害" in geography.data["question"]
    cloze = _by_index(OBJECTIVE / "2010-2022_English_Fill_in_Blanks.json")[0]
    assert cloze.data["qtype"] == "cloze"
    assert cloze.data["answer"].startswith("1. C; 2. D; 3. B; ")
    assert cloze.data["answer"].endswith("; 20. D")
    reading = _by_index(OBJECTIVE / "2010-2022_Chinese_Modern_Lit.json")[0]
    assert reading.data["answer"] == "1. C; 2. A; 3. D"


def test_real_multiple_select_answer_is_not_multiple_choice() -> None:
    record = _by_index(OBJECTIVE / "2010-2022_Physics_MCQs.json")[3]
    assert record.data["answer"] == "AC"
    assert record.data["qtype"] == "reading_comprehension"
    assert "options" not in record.data


def test_real_subjective_items() -> None:
    dictation = _by_index(
        SUBJECTIVE / "2010-2022_Chinese_Language_Famous_Passages_and_Sentences_Dictation.json"
    )[0]
    assert dictation.data["qtype"] == "dictation"
    assert dictation.data["answer"].startswith("（1）金就砺则利")
    assert "explanation" not in dictation.data  # the analysis is only a newline
    math = _by_index(SUBJECTIVE / "2010-2022_Math_II_Fill-in-the-Blank.json")[0]
    assert (math.data["qtype"], math.data["answer"]) == ("fill_in", "$x^{2}+y^{2}=2$")
    errors = _by_index(SUBJECTIVE / "2012-2022_English_Language_Error_Correction.json")[0]
    assert errors.data["answer"].splitlines()[:2] == ["little改为 less", "toy改为 toys"]
    assert errors.data["language"] == "en"


def test_every_sample_file_maps_as_specified() -> None:
    files = sorted(SAMPLE.rglob("*.json"))
    assert len(files) == len(FILE_KINDS) == len(EXPECTED_MAPPING) == 32
    for path in files:
        name = re.sub(r"^\d{4}-\d{4}_", "", path.stem)
        discipline, subdiscipline, qtypes = EXPECTED_MAPPING[name]
        records = list(read_gaokao(path))
        assert {r.data["discipline"] for r in records} == {discipline}, path
        assert {r.data["subdiscipline"] for r in records} == {subdiscipline}, path
        assert {r.data["qtype"] for r in records} == qtypes, path
        language = "en" if discipline == "English" else "zh"
        assert {r.data["language"] for r in records} == {language}, path


def test_sample_reads_and_validates_with_stats() -> None:
    stats = GaokaoStats()
    records = list(read_gaokao(SAMPLE, stats))
    assert len(records) == stats.records == 313
    assert stats.files == 32
    items = [validate_record(record) for record in records]
    assert len({item.id for item in items}) == len(items)
    assert stats.single_answer_mcqs == stats.parsed_mcqs + len(stats.unparsed)
    assert stats.parse_rate > 0.95
    assert [Path(location.path).name for location in stats.unparsed] == [
        "2010-2022_Math_II_MCQs.json"
    ]
    assert stats.multi_select == 6


def test_read_records_detects_the_sample_directory() -> None:
    assert len(list(read_records(SAMPLE))) == 313


def test_ids_are_deterministic() -> None:
    path = OBJECTIVE / "2010-2022_Math_I_MCQs.json"
    first = [record.data["id"] for record in read_gaokao(path)]
    assert first == [record.data["id"] for record in read_gaokao(path)]
    assert first[0] == str(uuid.uuid5(NAMESPACE, "gaokao:2010-2022_Math_I_MCQs:0"))


def test_sample_path_rejects_unknown_names() -> None:
    with pytest.raises(KeyError, match="unknown sample 'nope'"):
        sample_path("nope")
    assert (sample_path("gaokao_bench") / "LICENSE").is_file()
    assert (sample_path("mmlu_pro").parent / "NOTICE.md").is_file()


# --- line numbers -------------------------------------------------------------------


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_line_numbers_in_a_hand_written_file(tmp_path: Path, newline: str) -> None:
    item = _item()
    lines = [
        "{",  # 1
        '  "keywords": "x",',  # 2
        '  "example": [',  # 3
        "    " + json.dumps(_item(index=0), ensure_ascii=False) + ",",  # 4
        "    {",  # 5
        '      "question": "见 {\\n [ 图 ] } 题（ ）\\nA．1\\nB．2",',  # 6
        '      "answer": ["A"], "index": 1, "example": "nested",',  # 7
        '      "year": 2011',  # 8
        "    },",  # 9
        "",  # 10
        "    ",  # 11
        "    " + json.dumps(dict(item, index=2)),  # 12
        '  ], "more": {"example": []}',  # 13
        "}",  # 14
    ]
    path = tmp_path / "2010-2022_Math_I_MCQs.json"
    path.write_bytes((newline.join(lines) + newline).encode("utf-8"))
    records = list(read_gaokao(path))
    assert [record.location.line for record in records] == [4, 5, 12]
    assert records[1].data["options"] == ["1", "2"]
    assert records[1].data["source"] == "GAOKAO 2011"


def test_line_numbers_in_a_single_line_file(tmp_path: Path) -> None:
    path = tmp_path / "2010-2022_Math_I_MCQs.json"
    document = {"keywords": "x", "example": [_item(index=i) for i in range(3)]}
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    assert [record.location.line for record in read_gaokao(path)] == [1, 1, 1]


def test_line_numbers_in_a_pretty_printed_file(tmp_path: Path) -> None:
    items = [_item(index=i, analysis="第一行\n第二行") for i in range(3)]
    path = _write(tmp_path, items)
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [number for number, line in enumerate(lines, start=1) if line == "        {"]
    assert [record.location.line for record in read_gaokao(path)] == starts == [4, 15, 26]


def test_sample_line_numbers_point_at_each_items_object() -> None:
    for path in sorted(SAMPLE.rglob("*.json")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for record in read_gaokao(path):
            start = end = record.location.line
            assert lines[start - 1] == "        {", (path, start)
            while not lines[end - 1].startswith("        }"):
                end += 1
            index = re.search(r'^            "index": (\d+),?$', "\n".join(lines[start:end]), re.M)
            assert index is not None, (path, start)
            expected = uuid.uuid5(NAMESPACE, f"gaokao:{path.stem}:{index.group(1)}")
            assert record.data["id"] == str(expected), (path, start)


# --- malformed input ----------------------------------------------------------------


def test_invalid_json_reports_the_line(tmp_path: Path) -> None:
    path = tmp_path / "2010-2022_Math_I_MCQs.json"
    path.write_text('{\n  "example": [\n    {"question": "q",}\n  ]\n}\n', encoding="utf-8")
    assert str(_error(path)).startswith(f"{path}:3: json: invalid JSON")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("[" * 200_000 + "]" * 200_000, "nested deeper than 64 levels"),
        ("9" * 5000, "a number of 5000 characters"),
        ("-Infinity", "-Infinity is not a JSON number"),
        ('"a\x00"', "contains a NUL character"),
    ],
    ids=["deep", "5000-digits", "infinity", "nul"],
)
def test_hostile_json_reports_the_line(tmp_path: Path, value: str, problem: str) -> None:
    path = tmp_path / "2010-2022_Math_I_MCQs.json"
    path.write_text(
        '{\n  "example": [\n    {"question": "q", "index": 1},\n    {"score": '
        + value
        + "}\n  ]\n}\n",
        encoding="utf-8",
    )
    assert str(_error(path)).startswith(f"{path}:4: json: {problem}")


@pytest.mark.parametrize(
    "text",
    [
        '{"example": [1,]}',
        '{"example": [],}',
        '{"example": []} []',
        '[{"example": []}]',
        '{"example": [] "keywords": "x"}',
    ],
)
def test_structural_json_errors(tmp_path: Path, text: str) -> None:
    path = tmp_path / "2010-2022_Math_I_MCQs.json"
    path.write_text(text, encoding="utf-8")
    assert str(_error(path)).startswith(f"{path}:1: json: ")


@pytest.mark.parametrize(
    ("document", "message"),
    [({"keywords": "x"}, "missing"), ({"example": {"a": 1}}, "not a list")],
)
def test_missing_example(tmp_path: Path, document: dict[str, Any], message: str) -> None:
    path = tmp_path / "2010-2022_Math_I_MCQs.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert str(_error(path)).startswith(f"{path}:1: example: {message}")


@pytest.mark.parametrize(
    ("item", "field"),
    [
        (_item(question=None), "question"),
        (_item(question="   "), "question"),
        (_item(question=["list"]), "question"),
        (_item(answer=None), "answer"),
        (_item(answer=[]), "answer"),
        (_item(answer=[""]), "answer"),
        (_item(answer=""), "answer"),
        (_item(answer=[1]), "answer"),
        (_item(index=None), "index"),
        (_item(analysis=["x"]), "analysis"),
        ("not an object", "example"),
    ],
)
def test_bad_items_name_file_line_and_field(tmp_path: Path, item: Any, field: str) -> None:
    path = _write(tmp_path, [_item(), item])
    lines = path.read_text(encoding="utf-8").splitlines()
    second = 15  # the first item takes lines 4-14 of the pretty-printed file
    assert lines[second - 2] == "        }," and lines[second - 1].startswith("        ")
    assert str(_error(path)).startswith(f"{path}:{second}: {field}: ")


def test_unknown_file_name_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path, [_item()], "2010-2022_Astrology_MCQs.json")
    assert file_kind(path) is None
    assert str(_error(path)).startswith(f"{path}:1: file: unknown GAOKAO-Bench file name")


def test_year_prefix_may_change(tmp_path: Path) -> None:
    path = _write(tmp_path, [_item()], "2010-2024_Math_I_MCQs.json")
    assert next(read_gaokao(path)).data["subdiscipline"] == "Math I"


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no GAOKAO-Bench"):
        list(read_gaokao(tmp_path))


# --- the full real data set ---------------------------------------------------------


@needs_full_data
def test_full_data_set_reads_and_validates() -> None:
    stats = GaokaoStats()
    records = list(read_gaokao(FULL, stats))
    assert len(records) == 2_811
    assert stats.files == 32
    items = [validate_record(record) for record in records]
    assert len({item.id for item in items}) == 2_811
    assert all(item.subdiscipline for item in items)
    assert stats.single_answer_mcqs == 1_503
    assert stats.multi_select == 23
    assert stats.parsed_mcqs + len(stats.unparsed) == stats.single_answer_mcqs
    assert stats.parse_rate > 0.99
    parsed = [item for item in items if item.qtype == "multiple_choice"]
    assert len(parsed) == stats.parsed_mcqs
    assert all(item.options is not None and len(item.options) == 4 for item in parsed)


@needs_full_data
def test_full_data_file_names_are_all_known() -> None:
    names = {re.sub(r"^\d{4}-\d{4}_", "", path.stem) for path in FULL.rglob("*.json")}
    assert names == set(FILE_KINDS) == set(EXPECTED_MAPPING)
    assert all(file_kind(path) is not None for path in FULL.rglob("*.json"))
