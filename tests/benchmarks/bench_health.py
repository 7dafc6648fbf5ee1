"""Benchmark: bank health over a large sparse response matrix.

Run: ``python tests/benchmarks/bench_health.py [--items 1000000] [--models 60]
[--observed 0.05] [--iterations 100]`` (not collected by pytest). Prints, as JSON, the
seconds to build the matrix, to compute the item statistics and the whole report (with
and without the per-item section), and the process's peak resident memory.

Synthetic bank: 10 disciplines, families of 1-3 variants, 2PL items (a ~ lognormal,
b ~ N(0, 1)); 60 models in 10 families of 6 sizes whose ability grows with size; each
cell observed with probability ``--observed``; rubric scores 0-3 (3 or 0 from the 2PL
outcome, one in ten moved one step toward the middle, as a judge's partial credit).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from bank.health.items import item_statistics
from bank.health.labels import ItemLabels
from bank.health.population import parse_population
from bank.health.report import HealthOptions, health_report
from bank.health.responses import ModelInfo, Responses

DISCIPLINES = 10
FAMILIES = 10
SIZES = (1.5, 3.0, 7.0, 14.0, 32.0, 72.0)


def synthetic(
    n_items: int, n_models: int, observed: float, seed: int
) -> tuple[Responses, ItemLabels]:
    rng = np.random.default_rng(seed)
    models = [
        ModelInfo(f"m{j}", f"family-{j % FAMILIES}", SIZES[(j // FAMILIES) % len(SIZES)])
        for j in range(n_models)
    ]
    size_rank = np.array([SIZES.index(m.params_b or SIZES[0]) for m in models], dtype=float)
    theta = rng.normal(0, 0.5, n_models) + 0.35 * (size_rank - size_rank.mean())
    a = rng.lognormal(0.0, 0.3, n_items)
    b = rng.normal(0.0, 1.0, n_items)
    n_cells = int(n_items * n_models * observed)
    flat = np.unique(rng.integers(0, n_items * n_models, n_cells, dtype=np.int64))
    item, model = flat // n_models, flat % n_models
    p = 1.0 / (1.0 + np.exp(-a[item] * (theta[model] - b[item])))
    rubric = np.where(rng.random(item.size) < p, 3, 0)
    partial = rng.random(item.size) < 0.1
    rubric = np.where(partial, np.where(rubric == 3, 2, 1), rubric)
    family = np.cumsum(rng.random(n_items) < 0.5) - 1  # runs of 1-3 variants, mostly
    discipline = tuple(f"d{i % DISCIPLINES}" for i in range(n_items))
    labels = ItemLabels(discipline, ("mc",) * n_items, ("",) * n_items)
    responses = Responses.from_cells(
        [str(i) for i in range(n_items)], models, item, model, rubric / 3.0, family
    )
    return responses, labels


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--models", type=int, default=60)
    parser.add_argument("--observed", type=float, default=0.05)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    started = time.perf_counter()
    responses, labels = synthetic(args.items, args.models, args.observed, args.seed)
    built = time.perf_counter()
    rss_built = peak_rss_mib()
    item_statistics(responses)
    stats_s = time.perf_counter() - built
    population = parse_population("all")
    t0 = time.perf_counter()
    summary = health_report(
        responses,
        labels,
        population=population,
        options=HealthOptions(stability_iterations=args.iterations, items=False),
    )
    report_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    full = health_report(
        responses,
        labels,
        population=population,
        options=HealthOptions(stability_iterations=args.iterations, items=True),
    )
    full_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    spelled = len(full.items)
    items_json_s = time.perf_counter() - t2
    print(
        json.dumps(
            {
                "items": args.items,
                "models": args.models,
                "cells": int(responses.score.size),
                "build_s": round(built - started, 2),
                "item_statistics_s": round(stats_s, 2),
                "report_without_items_s": round(report_s, 2),
                "report_with_items_s": round(full_s, 2),
                "item_section_s": round(items_json_s, 2),
                "item_section_rows": spelled,
                "peak_rss_mib_after_build": round(rss_built, 1),
                "peak_rss_mib": round(peak_rss_mib(), 1),
                "flagged": len(full.flags),
                "bank": {k: summary.bank[k] for k in ("ds", "cad", "cas", "stability", "bhi")},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
