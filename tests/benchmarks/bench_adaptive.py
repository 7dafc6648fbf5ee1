"""Benchmark: adaptive policies replayed on MMLU-Pro's recorded
responses (20 real models, 12,032 items, 14 disciplines), sessions of at most 1,000 items.

Run (not collected by pytest)::

    cd /work/main && . .venv/bin/activate
    python tests/benchmarks/bench_adaptive.py [--runs 200] [--jobs 2] [--json results.json]

Three parts, each through :func:`bank.adaptive.replay.replay` (the engine behind
``proctor simulate``; item parameters for ``neyman-irt`` are fitted leaving the simulated
model out, so no policy learns from the model it is scored on):

1. every policy with the ``normal`` stopping rule (the variance-adaptive one) at the target
   half-width that brings ``neyman-irt`` to about 300 items;
2. every policy with the ``hoeffding-serfling`` rule (guaranteed, variance-blind) at the
   target that stops a proportional design near 300 items;
3. the trade-off curve: ``uniform`` and ``neyman-irt`` with the normal rule over a range of
   targets (items used against MAE and Spearman).

The issue's targets for the best policy: <= 300 items on average, Spearman >= 0.98, MAE
<= 1.5 points, coverage >= 0.95, >= 1.3x fewer items than uniform with the same rule.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bank.adaptive.bounds import Bound  # noqa: E402
from bank.adaptive.policy import AdaptiveConfig, Policy  # noqa: E402
from bank.adaptive.recorded import load_items, load_responses  # noqa: E402
from bank.adaptive.replay import PolicySummary, replay  # noqa: E402
from tests.support.paths import SHARED_DATA  # noqa: E402

ALL = list(Policy)
HEADER = (
    "| policy | items mean | p95 | saved vs full | MAE (pts) | Spearman | Kendall | coverage "
    "| mean half-width | stopped precise |\n|---|---|---|---|---|---|---|---|---|---|"
)


def row(name: str, s: PolicySummary) -> str:
    return (
        f"| {name} | {s.items_mean:.1f} | {s.items_p95:.0f} | {s.saved_vs_full:.1%} | "
        f"{s.mae:.2f} | {s.spearman:.4f} | {s.kendall:.3f} | {s.coverage:.3f} | "
        f"{s.halfwidth_mean:.2f} | {s.stopped_precise:.0%} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--curve-runs", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--normal-target", type=float, default=7.0, help="points")
    parser.add_argument("--hs-target", type=float, default=11.8, help="points")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    data = SHARED_DATA / "mmlu_pro"
    responses = load_responses(data / "responses.csv")
    items = load_items(data / "items.jsonl")
    strata = [items[i].stratum(("discipline", "type")) for i in responses.item_ids]
    print(
        f"MMLU-Pro: {len(responses.models)} models x {len(responses.item_ids)} items, "
        f"{len(set(strata))} strata; runs {args.runs}, jobs {args.jobs}\n"
    )
    base = AdaptiveConfig(budget=1000, delta=0.05)
    out: dict[str, object] = {"runs": args.runs}

    for label, bound, target in (
        ("normal", Bound.NORMAL, args.normal_target),
        ("hoeffding-serfling", Bound.HOEFFDING_SERFLING, args.hs_target),
    ):
        config = replace(base, bound=bound, target_halfwidth=target / 100)
        started = time.monotonic()
        result = replay(
            responses, strata, policies=ALL, config=config, runs=args.runs, jobs=args.jobs
        )
        took = time.monotonic() - started
        print(f"## {label} rule, target half-width {target} points, delta 0.05 ({took:.0f} s)\n")
        print(HEADER)
        for name, summary in result.policies.items():
            print(row(name, summary))
        uniform = result.policies["uniform"].items_mean
        best = result.policies["neyman-irt"].items_mean
        print(f"\nuniform / neyman-irt items with the same rule: {uniform / best:.2f}x\n")
        out[label] = {
            "target_halfwidth": target,
            "seconds": took,
            "policies": {k: asdict(v) for k, v in result.policies.items()},
        }

    print("## trade-off (normal rule): items vs MAE and Spearman\n")
    print("| target (pts) | policy | items mean | MAE | Spearman | coverage |")
    print("|---|---|---|---|---|---|")
    curve = []
    for target in (4.0, 5.0, 6.0, 7.0, 8.0, 10.0):
        config = replace(base, bound=Bound.NORMAL, target_halfwidth=target / 100)
        result = replay(
            responses,
            strata,
            policies=[Policy.UNIFORM, Policy.NEYMAN_IRT],
            config=config,
            runs=args.curve_runs,
            jobs=args.jobs,
        )
        for name, s in result.policies.items():
            print(
                f"| {target} | {name} | {s.items_mean:.1f} | {s.mae:.2f} | {s.spearman:.4f} | "
                f"{s.coverage:.3f} |"
            )
            curve.append({"target": target, "policy": name, **asdict(s)})
    out["curve"] = curve
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
