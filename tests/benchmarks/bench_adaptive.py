"""Benchmark: adaptive policies replayed on MMLU-Pro's recorded
responses (20 real models, 12,032 items, 14 disciplines), sessions of at most 1,000 items.

Run (not collected by pytest)::

    cd /work/main && . .venv/bin/activate
    python tests/benchmarks/bench_adaptive.py [--runs 200] [--jobs 2] [--json results.json]
        [--parts normal,hoeffding-serfling,curve,targets]

Four parts, each through :func:`bank.adaptive.replay.replay` (the engine behind
``proctor simulate``; item parameters for ``neyman-irt`` and ``model-assisted`` are fitted
leaving the simulated model out, so no policy learns from the model it is scored on; a
``model-assisted`` session's leaderboard is the other models' full-set scores):

1. ``normal``: every policy with the ``normal`` stopping rule (the variance-adaptive one) at
   ``--normal-target`` points;
2. ``hoeffding-serfling``: every policy with the ``hoeffding-serfling`` rule (guaranteed,
   variance-blind) at the target that stops a proportional design near 300 items
   (``model-assisted`` always uses the normal interval on its own estimator's variance, so
   its row there is the normal rule at that target);
3. ``curve``: the trade-off, ``uniform`` and ``neyman-irt`` over ``--curve-targets`` and
   ``model-assisted`` over ``--assisted-targets`` with the normal rule (items used against
   MAE, per-discipline MAE and Spearman);
4. ``targets``: the best policy at the server's default settings (:data:`DEFAULTS`:
   ``model-assisted``, ``normal``, 7 points, budget 1,000, the rest
   :class:`~bank.adaptive.policy.AdaptiveConfig`'s defaults) over ``--target-runs`` runs,
   with PASS or MISS against :data:`TARGETS`. It reuses part 1's figures when part 1 ran
   the same configuration with as many runs.

Columns: items mean and p95; saved vs full (1 - items / budget); MAE and per-discipline MAE
in points against the full-set scores; Spearman and Kendall of each run's ranking against
the full-set ranking, averaged; coverage of the stated interval; mean half-width; the
shares of sessions stopped as precise and as settled; max exposure, the largest share of
sessions given one same item.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bank.adaptive.bounds import Bound  # noqa: E402
from bank.adaptive.policy import AdaptiveConfig, Policy  # noqa: E402
from bank.adaptive.recorded import ResponseMatrix, load_items, load_responses  # noqa: E402
from bank.adaptive.replay import POINTS, PolicySummary, ReplayResult, replay  # noqa: E402
from server.sessions.limits import SessionLimits  # noqa: E402
from tests.support.paths import SHARED_DATA  # noqa: E402

ALL = list(Policy)
PARTS = ("normal", "hoeffding-serfling", "curve", "targets")
CURVE_POLICIES = (Policy.UNIFORM, Policy.NEYMAN_IRT)
"""The baselines of the trade-off curve, over ``--curve-targets``."""
HEADER = (
    "| policy | items mean | p95 | saved vs full | MAE (pts) | discipline MAE (pts) "
    "| Spearman | Kendall | coverage | coverage ±1.96 se | mean half-width | stopped precise "
    "| stopped settled | max exposure |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def _defaults() -> AdaptiveConfig:
    """What a server session that leaves every adaptive option out uses
    (:class:`server.sessions.limits.AdaptiveDefaults`, the ``PROCTOR_ADAPTIVE_*``
    settings' defaults, over the default session size); the rest is AdaptiveConfig's."""
    limits = SessionLimits()
    server = limits.adaptive
    return AdaptiveConfig(
        policy=Policy(server.policy.value),
        budget=limits.default_items,
        target_halfwidth=server.target_halfwidth / POINTS,
        delta=server.delta,
        bound=Bound(server.bound.value),
        pilot=server.pilot,
        check_every=server.check_every,
    )


DEFAULTS = _defaults()
"""The best policy at its default settings: the configuration of the ``targets`` part."""


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    figure: Callable[[PolicySummary], float]
    passes: Callable[[float], bool]
    wanted: str
    stretch: bool = False


TARGETS = (
    Target("items mean", lambda s: s.items_mean, lambda v: v <= 300, "<= 300"),
    Target("MAE (pts)", lambda s: s.mae, lambda v: v <= 1.5, "<= 1.5"),
    Target("Spearman", lambda s: s.spearman, lambda v: v >= 0.98, ">= 0.98"),
    Target("coverage", lambda s: s.coverage, lambda v: v >= 0.95, ">= 0.95"),
    Target("items mean", lambda s: s.items_mean, lambda v: v <= 200, "<= 200", stretch=True),
)
"""What the best policy at :data:`DEFAULTS` must reach (the last is a stretch goal)."""


def row(name: str, s: PolicySummary) -> str:
    return (
        f"| {name} | {s.items_mean:.1f} | {s.items_p95:.0f} | {s.saved_vs_full:.1%} | "
        f"{s.mae:.2f} | {s.discipline_mae:.2f} | {s.spearman:.4f} | {s.kendall:.3f} | "
        f"{s.coverage:.3f} | {s.coverage_95:.3f} | {s.halfwidth_mean:.2f} | "
        f"{s.stopped_precise:.0%} | "
        f"{s.stopped_settled:.0%} | {s.max_exposure:.1%} |"
    )


def points(text: str) -> list[float]:
    """A comma-separated list of half-widths in points."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of numbers") from None
    if not values or any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: give positive half-widths in points")
    return values


def parts(text: str) -> list[str]:
    chosen = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in PARTS]
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(f"choose among {', '.join(PARTS)}")
    return chosen


@dataclass(frozen=True, slots=True)
class Bench:
    responses: ResponseMatrix
    strata: list[str]
    disciplines: list[str]
    jobs: int

    def replay(
        self, policies: Sequence[Policy], config: AdaptiveConfig, runs: int
    ) -> tuple[ReplayResult, float]:
        started = time.monotonic()
        result = replay(
            self.responses,
            self.strata,
            policies=policies,
            config=config,
            runs=runs,
            disciplines=self.disciplines,
            jobs=self.jobs,
        )
        return result, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per model, parts 1-2")
    parser.add_argument("--curve-runs", type=int, default=50, help="runs per model and point")
    parser.add_argument(
        "--target-runs", type=int, default=200, help="runs per model, targets part (>= 100)"
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--normal-target",
        type=float,
        default=DEFAULTS.target_halfwidth * POINTS,
        help="points (default: the server's)",
    )
    parser.add_argument("--hs-target", type=float, default=11.8, help="points")
    parser.add_argument(
        "--curve-targets",
        type=points,
        default=[4.0, 5.0, 6.0, 7.0, 8.0, 10.0],
        help="points, for uniform and neyman-irt",
    )
    parser.add_argument(
        "--assisted-targets",
        type=points,
        default=[5.0, 6.0, 7.0, 7.25, 7.5, 8.0, 10.0],
        help="points, for model-assisted",
    )
    parser.add_argument("--parts", type=parts, default=list(PARTS), help=",".join(PARTS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    data = SHARED_DATA / "mmlu_pro"
    responses = load_responses(data / "responses.csv")
    items = load_items(data / "items.jsonl")
    bench = Bench(
        responses,
        [items[i].stratum(("discipline", "type")) for i in responses.item_ids],
        [items[i].discipline for i in responses.item_ids],
        args.jobs,
    )
    print(
        f"MMLU-Pro: {len(responses.models)} models x {len(responses.item_ids)} items, "
        f"{len(set(bench.strata))} strata, {len(set(bench.disciplines))} disciplines; "
        f"parts {', '.join(args.parts)}; jobs {args.jobs}\n"
    )
    base = AdaptiveConfig(budget=1000, delta=0.05)
    out: dict[str, object] = {"runs": args.runs}
    # part 1's summaries by (configuration with its policy, runs), for the targets part
    same_rule: dict[tuple[AdaptiveConfig, int], PolicySummary] = {}
    uniform_items: dict[tuple[Bound, float], float] = {}

    for label, bound, target in (
        ("normal", Bound.NORMAL, args.normal_target),
        ("hoeffding-serfling", Bound.HOEFFDING_SERFLING, args.hs_target),
    ):
        if label not in args.parts:
            continue
        config = replace(base, bound=bound, target_halfwidth=target / POINTS)
        result, took = bench.replay(ALL, config, args.runs)
        print(
            f"## {label} rule, target half-width {target:g} points, delta 0.05, "
            f"{args.runs} runs x {len(responses.models)} models ({took:.0f} s)\n"
        )
        if bound is not Bound.NORMAL:
            print("(model-assisted always stops on the normal interval of its estimator)\n")
        print(HEADER)
        for name, summary in result.policies.items():
            print(row(name, summary))
            same_rule[replace(config, policy=Policy(name)), args.runs] = summary
        uniform = result.policies["uniform"].items_mean
        uniform_items[bound, config.target_halfwidth] = uniform
        print()
        for name in ("neyman-irt", "model-assisted"):
            print(f"uniform / {name} items with the same rule: ", end="")
            print(f"{uniform / result.policies[name].items_mean:.2f}x")
        print()
        out[label] = {
            "target_halfwidth": target,
            "seconds": took,
            "policies": {k: asdict(v) for k, v in result.policies.items()},
        }

    if "curve" in args.parts:
        print(
            f"## trade-off (normal rule): items vs MAE and Spearman, {args.curve_runs} runs "
            "per point\n"
        )
        print(
            "| target (pts) | policy | items mean | MAE | discipline MAE | Spearman | coverage "
            "| stopped settled | max exposure |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        curve = []
        for target in sorted({*args.curve_targets, *args.assisted_targets}):
            policies = [
                *(CURVE_POLICIES if target in args.curve_targets else ()),
                *((Policy.MODEL_ASSISTED,) if target in args.assisted_targets else ()),
            ]
            config = replace(base, bound=Bound.NORMAL, target_halfwidth=target / POINTS)
            result, _ = bench.replay(policies, config, args.curve_runs)
            for name, s in result.policies.items():
                print(
                    f"| {target:g} | {name} | {s.items_mean:.1f} | {s.mae:.2f} | "
                    f"{s.discipline_mae:.2f} | {s.spearman:.4f} | {s.coverage:.3f} | "
                    f"{s.stopped_settled:.0%} | {s.max_exposure:.1%} |"
                )
                curve.append({"target": target, "policy": name, **asdict(s)})
        print()
        out["curve"] = curve

    if "targets" in args.parts:
        out["targets"] = targets(bench, args.target_runs, same_rule, uniform_items)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


def targets(
    bench: Bench,
    runs: int,
    same_rule: dict[tuple[AdaptiveConfig, int], PolicySummary],
    uniform_items: dict[tuple[Bound, float], float],
) -> dict[str, object]:
    """Part 4: :data:`DEFAULTS` against :data:`TARGETS`; printed and returned for the JSON."""
    config = DEFAULTS
    took = 0.0
    summary = same_rule.get((config, runs))
    if summary is None:
        result, took = bench.replay([config.policy], config, runs)
        summary = result.policies[config.policy.value]
    print(
        f"## targets: {config.policy} at its default settings ({config.bound} rule, target "
        f"half-width {config.target_halfwidth * POINTS:g} points, delta {config.delta:g}, "
        f"budget {config.budget}, a check every {config.check_every}, pilot {config.pilot}, "
        f"selection floor {config.selection_floor:g}), {runs} runs x "
        f"{len(bench.responses.models)} models"
        + (f" ({took:.0f} s)" if took else " (the figures of part 1)")
        + "\n"
    )
    print(HEADER)
    print(row(config.policy.value, summary))
    print("\n| target | wanted | measured | |\n|---|---|---|---|")
    verdicts = []
    for target in TARGETS:
        value = target.figure(summary)
        verdict = "PASS" if not math.isnan(value) and target.passes(value) else "MISS"
        name = f"{target.name} (stretch)" if target.stretch else target.name
        print(f"| {name} | {target.wanted} | {value:.4g} | {verdict} |")
        verdicts.append(
            {"target": name, "wanted": target.wanted, "measured": value, "verdict": verdict}
        )
    uniform = uniform_items.get((config.bound, config.target_halfwidth))
    if uniform is not None:
        ratio = uniform / summary.items_mean
        verdict = "PASS" if ratio >= 1.3 else "MISS"
        print(f"| fewer items than uniform, same rule | >= 1.3x | {ratio:.2f}x | {verdict} |")
        verdicts.append(
            {
                "target": "fewer items than uniform, same rule",
                "wanted": ">= 1.3x",
                "measured": ratio,
                "verdict": verdict,
            }
        )
    print()
    return {
        "config": {
            "policy": str(config.policy),
            "bound": str(config.bound),
            "target_halfwidth": round(config.target_halfwidth * POINTS, 9),
            "delta": config.delta,
            "budget": config.budget,
            "check_every": config.check_every,
            "pilot": config.pilot,
            "selection_floor": config.selection_floor,
        },
        "runs": runs,
        "seconds": took,
        "summary": asdict(summary),
        "verdicts": verdicts,
    }


if __name__ == "__main__":
    main()
