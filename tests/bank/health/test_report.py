"""The health report on real recorded data (MMLU-Pro, 20 models): its JSON contract, its
figures against direct computations, the population it states, and the choices it makes."""

from __future__ import annotations

import json
import math
from functools import cache

import numpy as np
import pytest
from scipy import stats as scipy_stats

from bank.health.labels import Breakdown, ItemLabels
from bank.health.population import parse_population
from bank.health.recorded import RecordedBank, load_recorded
from bank.health.report import FIGURES, HealthOptions, HealthReport, health_report
from bank.health.responses import ModelInfo, Responses
from bank.health.results import Minimums
from tests.support.paths import SHARED_DATA

MMLU_PRO_DIR = SHARED_DATA / "mmlu_pro"
ITEM_KEYS = {"p", "difficulty", "discrimination", "cas", "cas_kfold", "inversions", "cad"}
ITEM_KEYS |= {"separation", "n", "flags", "pairs", "irt"}
FAST = HealthOptions(stability_iterations=20)


@cache
def mmlu_pro() -> RecordedBank:
    return load_recorded(
        MMLU_PRO_DIR / "responses.csv", MMLU_PRO_DIR / "items.jsonl", MMLU_PRO_DIR / "models.csv"
    )


@cache
def report(population: str = "all") -> HealthReport:
    bank = mmlu_pro()
    return health_report(
        bank.responses, bank.labels, population=parse_population(population), options=FAST
    )


def test_the_json_has_every_section_and_no_nan() -> None:
    body = report().to_dict()
    text = json.dumps(body, allow_nan=False)  # null, never NaN
    assert set(body) == {"population", "choices", "bank", "strata", "items", "subsets"}
    assert set(FIGURES) | {"n_items", "n_models"} <= set(body["bank"])
    assert len(body["strata"]) == 14 and "law" in body["strata"]
    assert len(body["items"]) == 12032
    assert all(set(row) == ITEM_KEYS for row in body["items"].values())
    assert set(body["subsets"]) == {"cad_ds", "cas", "cad_ds_cas"}
    for name, reason in body["bank"]["missing"].items():
        assert body["bank"][name] is None and reason
    assert json.loads(text)["bank"]["n_models"] == 20


def test_bank_figures_equal_direct_computations() -> None:
    bank = mmlu_pro()
    dense = bank.responses.dense()
    scores = np.nanmean(dense, axis=0)  # each model's mean over its items
    sd, mean = scores.std(ddof=0), scores.mean()
    gaps = np.abs(scores[:, None] - scores[None, :])[np.triu_indices(scores.size, 1)]
    ds = sd / mean * math.sqrt(np.mean(gaps > 0.02 + 1e-9))
    figures = report().bank
    assert figures["ds"] == pytest.approx(ds, rel=1e-9)
    p90, p10 = np.percentile(scores * 100, [90, 10])
    assert figures["rcv"] == pytest.approx((p90 - p10) / 100, rel=1e-9)
    items = report().items
    p = np.array([items[i]["p"] for i in bank.responses.item_ids], dtype=float)
    np.testing.assert_allclose(p, np.nanmean(dense, axis=1), atol=1e-6)
    cas = [row["cas"] for row in items.values() if row["cas"] is not None]
    assert figures["cas"] == pytest.approx(float(np.mean(cas)), abs=1e-6)


def test_a_discipline_stratum_is_computed_on_its_items_only() -> None:
    bank = mmlu_pro()
    law = np.array([d == "law" for d in bank.labels.discipline])
    dense = bank.responses.dense()[law]
    scores = np.nanmean(dense, axis=0)
    rho = scipy_stats.spearmanr(scores, np.nanmean(bank.responses.dense(), axis=0)).statistic
    figures = report().strata["law"]
    assert figures["n_items"] == int(law.sum())
    assert figures["rcv"] == pytest.approx(
        (np.percentile(scores * 100, 90) - np.percentile(scores * 100, 10)) / 100, rel=1e-9
    )
    assert rho > 0.8  # law ranks models roughly as the bank does
    assert [b["n_items"] for b in figures["by_difficulty"]] != [0, 0, 0, 0]


def test_every_result_states_its_population_and_the_figures_depend_on_it() -> None:
    everyone, top = report("all"), report("top:10")
    assert everyone.population["n_models"] == 20 and top.population["n_models"] == 10
    assert (
        top.population["excluded"] == {"not among the top 10": 10}
        or sum(top.population["excluded"].values()) == 10
    )
    assert top.bank["n_models"] == 10
    # Capability Alignment's claim: the same items, another population, other figures.
    assert top.bank["ds"] != pytest.approx(everyone.bank["ds"], abs=0.01)
    assert top.population["abilities"]["mean"] > everyone.population["abilities"]["mean"]


def test_too_few_models_gives_null_with_a_reason() -> None:
    bank = mmlu_pro()
    two = ",".join(m.name for m in bank.responses.models[:2])
    small = health_report(
        bank.responses, bank.labels, population=parse_population(f"models:{two}"), options=FAST
    )
    assert small.bank["ds"] is None and "fewer than 3 models" in small.bank["missing"]["ds"]
    assert all(row["p"] is None for row in list(small.items.values())[:50])


def test_cbrc_and_bqs_against_an_imported_leaderboard() -> None:
    bank = mmlu_pro()
    law = np.array([d == "law" for d in bank.labels.discipline])
    scores = np.nanmean(bank.responses.dense()[law], axis=0)
    same = {m.name: float(s) for m, s in zip(bank.responses.models, scores, strict=True)}
    reversed_board = {name: -value for name, value in same.items()}
    result = health_report(
        bank.responses,
        bank.labels,
        population=parse_population("all"),
        options=FAST,
        peers={"law": [same], "math": [reversed_board]},
    )
    law_figures = result.strata["law"]
    assert law_figures["cbrc"] == pytest.approx(1.0)
    assert law_figures["bqs"] == pytest.approx(
        0.3 * 1.0 + 0.3 * law_figures["ds"] + 0.4 * law_figures["cad"]
    )
    assert result.strata["math"]["cbrc"] < 0.5
    assert result.strata["physics"]["cbrc"] is None


def test_bhi_over_strata_uses_two_dimensions_and_is_in_range() -> None:
    strata = report().strata
    values = [s["bhi"] for s in strata.values()]
    assert all(v is not None and 0.0 <= v <= 1.0 for v in values)
    assert "Impact" in report().choices["bhi"] or "private bank" in report().choices["bhi"]
    assert report().bank["bhi"] == pytest.approx(
        np.average(values, weights=[s["n_items"] for s in strata.values()])
    )


def test_selective_subsets_keep_the_ranking_and_raise_discriminability() -> None:
    subsets = report().subsets
    for rule in ("cad_ds", "cas"):
        s = subsets[rule]
        assert 0 < s["retention"] < 0.5
        assert s["rank_tau"]["value"] > 0.8
        assert s["ds_subset"]["value"] > s["ds_full"]["value"]


def test_families_split_bootstraps_and_breakdowns_follow_labels() -> None:
    models = [ModelInfo(f"m{j}", "f", float(j + 1)) for j in range(8)]
    rng = np.random.default_rng(3)
    dense = (rng.random((40, 8)) < np.linspace(0.2, 0.9, 8)).astype(float)
    responses = Responses.from_dense(
        [f"i{i}" for i in range(40)], models, dense, np.arange(40) // 2
    )
    labels = ItemLabels(
        tuple("a" if i < 20 else "b" for i in range(40)),
        tuple("mc" if i % 2 else "tf" for i in range(40)),
        ("",) * 40,
    )
    result = health_report(
        responses,
        labels,
        population=parse_population("all"),
        options=HealthOptions(
            by=Breakdown.DISCIPLINE_QTYPE,
            minimums=Minimums(models_per_item=3),
            stability_iterations=10,
        ),
    )
    assert set(result.strata) == {"a / mc", "a / tf", "b / mc", "b / tf"}
    assert sum(s["n_items"] for s in result.strata.values()) == 40
    # One family of 8 sizes: 28 ordered pairs on every item answered by all.
    assert all(row["pairs"] == 28 for row in result.items.values())
