"""Populations: parsing the --population text, picking the models, describing them."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bank.health.population import (
    MAX_TOP,
    Population,
    PopulationKind,
    describe,
    parse_population,
    select_models,
    top_k_mask,
)
from bank.health.responses import ModelInfo, Responses

D = dt.date


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("all", Population()),
        ("  ALL ", Population()),
        ("top:10", Population(PopulationKind.TOP, top=10)),
        ("Top: 3 ", Population(PopulationKind.TOP, top=3)),
        (f"top:{MAX_TOP}", Population(PopulationKind.TOP, top=MAX_TOP)),
        ("models:a,b,c", Population(PopulationKind.NAMED, names=("a", "b", "c"))),
        (
            "models: qwen-7b , Llama 3.1 ",
            Population(PopulationKind.NAMED, names=("qwen-7b", "Llama 3.1")),
        ),
        ("family:Qwen2.5", Population(PopulationKind.FAMILY, family="Qwen2.5")),
        ("before:2024-06-01", Population(PopulationKind.BEFORE, date=D(2024, 6, 1))),
        ("after:2024-02-29", Population(PopulationKind.AFTER, date=D(2024, 2, 29))),
    ],
)
def test_parse_good(text: str, expected: Population) -> None:
    population = parse_population(text)
    assert population == expected
    assert parse_population(population.text) == population


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("\x00", "control"),
        ("all\x00", "control"),
        ("top:1\x00", "control"),
        ("models:a\nb", "control"),
        ("x" * 200_000, "longer than"),
        ("everything", "unknown population kind"),
        ("named:a", "unknown population kind"),
        (":3", "unknown population kind"),
        ("all:3", "no argument"),
        ("top", "needs an argument"),
        ("top:", "needs an argument"),
        ("top:0", "from 1"),
        ("top:-1", "whole number"),
        ("top:+3", "whole number"),
        ("top:2.5", "whole number"),
        ("top:1e3", "whole number"),
        ("top:٣", "whole number"),
        ("top:²", "whole number"),
        (f"top:{MAX_TOP + 1}", "from 1"),
        ("top:" + "9" * 30, "whole number"),
        ("top:" + "9" * 5000, "whole number"),
        ("models:", "needs an argument"),
        ("models:a,,b", "empty model name"),
        ("models:a,", "empty model name"),
        ("models:a,b,a", "named twice"),
        ("models:" + "m" * 500, "longer than"),
        ("family:", "needs an argument"),
        ("before:", "needs an argument"),
        ("before:2024-13-01", "not a calendar date"),
        ("before:2023-02-29", "not a calendar date"),
        ("after:2024-06-31", "not a calendar date"),
        ("after:20240601", "YYYY-MM-DD"),
        ("after:2024-W01-1", "YYYY-MM-DD"),
        ("after:2024-06-01T00:00", "YYYY-MM-DD"),
        ("after:yesterday", "YYYY-MM-DD"),
        ("before:０２０２-01-01", "YYYY-MM-DD"),
    ],
)
def test_parse_hostile(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_population(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_parse_arbitrary_text_only_raises_value_error(text: str) -> None:
    try:
        population = parse_population(text)
    except ValueError:
        return
    assert parse_population(population.text) == population


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": PopulationKind.TOP},
        {"kind": PopulationKind.TOP, "top": 0},
        {"kind": PopulationKind.TOP, "top": True},
        {"kind": PopulationKind.ALL, "top": 3},
        {"kind": PopulationKind.NAMED},
        {"kind": PopulationKind.ALL, "names": ("a",)},
        {"kind": PopulationKind.FAMILY},
        {"kind": PopulationKind.BEFORE},
        {"kind": PopulationKind.ALL, "date": D(2024, 1, 1)},
        {"kind": "nonsense"},
    ],
)
def test_population_checks_its_fields(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Population(**kwargs)  # type: ignore[arg-type]


# Seven models; m6 answered nothing. Scores per model (mean over its answered items):
#   m0 .25, m1 .75, m2 .5, m3 .75, m4 1.0, m5 .5 (over 2 items), m6 none.
MODELS = (
    ModelInfo("m0", "A", 1.5, D(2024, 1, 10)),
    ModelInfo("m1", "A", 7.0, D(2024, 6, 1)),
    ModelInfo("m2", "A", 14.0, None),
    ModelInfo("m3", "B", 2.0, D(2023, 12, 31)),
    ModelInfo("m4", "B", 9.0, D(2024, 9, 1)),
    ModelInfo("m5", None, None, D(2024, 5, 31)),
    ModelInfo("m6", "B", 4.0, D(2024, 7, 1)),
)
MATRIX = np.array(
    [
        [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, np.nan],
        [0.0, 1.0, 0.0, 1.0, 1.0, np.nan, np.nan],
        [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, np.nan],
        [0.0, 0.0, 0.0, 1.0, 1.0, np.nan, np.nan],
    ]
)


@pytest.fixture
def responses() -> Responses:
    return Responses.from_dense([f"i{i}" for i in range(4)], MODELS, MATRIX)


def _names(responses: Responses, mask: np.ndarray) -> list[str]:
    return [responses.models[i].name for i in np.flatnonzero(mask)]


def test_all_leaves_out_models_without_responses(responses: Responses) -> None:
    mask = select_models(responses, parse_population("all"))
    assert _names(responses, mask) == ["m0", "m1", "m2", "m3", "m4", "m5"]


def test_top_k_by_mean_score_with_ties_by_model_order(responses: Responses) -> None:
    scores = np.nanmean(MATRIX[:, :6], axis=0)
    assert np.allclose(scores, [0.25, 0.75, 0.5, 0.75, 1.0, 0.5])
    expected = {
        1: ["m4"],
        2: ["m1", "m4"],
        3: ["m1", "m3", "m4"],
        4: ["m1", "m2", "m3", "m4"],  # m2 and m5 tie at .5: m2 comes first
        5: ["m1", "m2", "m3", "m4", "m5"],
        6: ["m0", "m1", "m2", "m3", "m4", "m5"],
        50: ["m0", "m1", "m2", "m3", "m4", "m5"],
    }
    for k, names in expected.items():
        mask = select_models(responses, Population(PopulationKind.TOP, top=k))
        assert _names(responses, mask) == names, k


def test_top_k_mask_treats_float_noise_as_a_tie() -> None:
    values = np.array([0.3 + 1e-12, 0.1, np.nan, 0.3, 0.9])
    assert top_k_mask(values, 2).tolist() == [True, False, False, False, True]
    values = np.array([0.3, 0.1, np.nan, 0.3 + 1e-12, 0.9])
    assert top_k_mask(values, 2).tolist() == [True, False, False, False, True]
    assert top_k_mask(values, 0).tolist() == [False] * 5
    assert top_k_mask(values, 10).tolist() == [True, True, False, True, True]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.sampled_from([0.0, 0.25, 0.5, 1.0])), max_size=12),
    st.integers(0, 14),
)
def test_top_k_mask_matches_a_sort(raw: list[float | None], k: int) -> None:
    values = np.array([np.nan if v is None else v for v in raw], dtype=np.float64)
    ranked = sorted((i for i, v in enumerate(raw) if v is not None), key=lambda i: (-raw[i], i))  # type: ignore[operator]
    expected = np.zeros(len(raw), dtype=bool)
    expected[ranked[:k]] = True
    assert top_k_mask(values, k).tolist() == expected.tolist()


def test_family_and_unknown_family(responses: Responses) -> None:
    mask = select_models(responses, parse_population("family:B"))
    assert _names(responses, mask) == ["m3", "m4"]  # m6 is of B but answered nothing
    with pytest.raises(ValueError, match="no model of family 'Qwen3'; families: A, B"):
        select_models(responses, parse_population("family:Qwen3"))


def test_named_and_unknown_names(responses: Responses) -> None:
    mask = select_models(responses, parse_population("models:m4,m0,m6"))
    assert _names(responses, mask) == ["m0", "m4"]
    with pytest.raises(ValueError, match="no such model in the responses: 'x', 'y'"):
        select_models(responses, parse_population("models:m0,x,y"))


def test_dates_split_the_dated_models(responses: Responses) -> None:
    before = select_models(responses, parse_population("before:2024-06-01"))
    after = select_models(responses, parse_population("after:2024-06-01"))
    assert _names(responses, before) == ["m0", "m3", "m5"]
    assert _names(responses, after) == ["m1", "m4"]  # m1 is dated on the day itself
    assert not np.any(before & after)
    nothing = select_models(responses, parse_population("before:2000-01-01"))
    assert not nothing.any()
    report = describe(parse_population("after:2024-06-01"), responses, after)
    assert report["excluded"] == {"dated before": 3, "no date": 1, "no responses": 1}


def test_describe_states_the_population(responses: Responses) -> None:
    population = parse_population("top:3")
    mask = select_models(responses, population)
    report = describe(population, responses, mask)
    json.dumps(report)
    theta = np.nanmean(MATRIX[:, :6], axis=0)[mask[:6]]
    assert report["kind"] == "top"
    assert report["text"] == "top:3"
    assert report["parameters"]["top"] == 3
    assert report["n_models"] == 3
    assert report["n_models_total"] == 7
    assert report["models"] == ["m1", "m3", "m4"]
    assert report["excluded"] == {"no responses": 1, "outside the top 3": 3}
    abilities = report["abilities"]
    assert abilities["n"] == 3
    assert abilities["mean"] == pytest.approx(theta.mean())
    assert abilities["sd"] == pytest.approx(np.std(theta, ddof=0))
    assert (abilities["min"], abilities["max"]) == (pytest.approx(0.75), pytest.approx(1.0))


def test_describe_an_empty_population(responses: Responses) -> None:
    population = parse_population("before:1999-01-01")
    report = describe(population, responses, select_models(responses, population))
    json.dumps(report)
    assert report["n_models"] == 0 and report["models"] == []
    assert report["abilities"] == {"n": 0, "mean": None, "sd": None, "min": None, "max": None}
    assert report["parameters"] == {"date": "1999-01-01", "rule": "model date < date"}
    assert sum(report["excluded"].values()) == 7


def test_describe_checks_the_mask(responses: Responses) -> None:
    with pytest.raises(ValueError, match="shape"):
        describe(Population(), responses, np.ones(3, dtype=bool))
