"""The bank-health evidence on MMLU-Pro's recorded responses (20 real models), as the
Markdown tables of docs/health.md.

Run: ``python tests/benchmarks/health_mmlu_pro.py [--data DIR] [--iterations 100]``
(not collected by pytest). Prints: bank and per-discipline figures for all 20 models and
for the top 10 (population dependence), DS and CAS by difficulty bin for both, and the
selective subsets with retention, rank tau to the full ranking, stability and DS.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from bank.health.population import parse_population
from bank.health.recorded import load_recorded
from bank.health.report import HealthOptions, HealthReport, health_report
from tests.support.paths import SHARED_DATA

COLUMNS = ("ds", "edr", "rcv", "cad", "cas", "stability", "s_sta", "ovl", "bhi")


def cell(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}"


def figures_table(report: HealthReport) -> list[str]:
    lines = ["| stratum | items | models | " + " | ".join(COLUMNS) + " |"]
    lines.append("|---|" + "---:|" * (len(COLUMNS) + 2))
    for name, row in [("**bank**", report.bank), *report.strata.items()]:
        values = " | ".join(cell(row[c]) for c in COLUMNS)
        lines.append(f"| {name} | {row['n_items']} | {row['n_models']} | {values} |")
    return lines


def bins_table(reports: dict[str, HealthReport]) -> list[str]:
    lines = [
        "| difficulty 1 − p | "
        + " | ".join(f"items ({k}) | DS ({k}) | CAS ({k})" for k in reports)
        + " |"
    ]
    lines.append("|---|" + "---:|" * (3 * len(reports)))
    first = next(iter(reports.values()))
    for b, row in enumerate(first.bank["by_difficulty"]):
        low, high = row["difficulty"]
        cells = []
        for report in reports.values():
            r = report.bank["by_difficulty"][b]
            cells += [str(r["n_items"]), cell(r["ds"]), cell(r["cas"])]
        lines.append(f"| [{low:.2f}, {high:.2f}) | " + " | ".join(cells) + " |")
    return lines


def subsets_table(reports: dict[str, HealthReport]) -> list[str]:
    lines = [
        "| population | subset | items kept | retention | rank τ to full | stability "
        "(subset / full) | DS (subset / full) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for population, report in reports.items():
        for rule, s in report.subsets.items():
            lines.append(
                f"| {population} | {rule} | {s['retained']} | {cell(s['retention'])} | "
                f"{cell(s['rank_tau']['value'])} | {cell(s['stability_subset']['value'])} / "
                f"{cell(s['stability_full']['value'])} | {cell(s['ds_subset']['value'])} / "
                f"{cell(s['ds_full']['value'])} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA / "mmlu_pro")
    parser.add_argument("--iterations", type=int, default=100)
    args = parser.parse_args()
    bank = load_recorded(
        args.data / "responses.csv", args.data / "items.jsonl", args.data / "models.csv"
    )
    options = HealthOptions(stability_iterations=args.iterations)
    reports = {
        name: health_report(
            bank.responses, bank.labels, population=parse_population(name), options=options
        )
        for name in ("all", "top:10")
    }
    for name, report in reports.items():
        flagged = len(report.flags)
        print(
            f"\n### Population `{name}` ({report.population['n_models']} models, "
            f"{flagged} items flagged)\n"
        )
        print("\n".join(figures_table(report)))
    print("\n### DS and CAS by difficulty bin\n")
    print("\n".join(bins_table(reports)))
    print("\n### Selective subsets\n")
    print("\n".join(subsets_table(reports)))


if __name__ == "__main__":
    main()
