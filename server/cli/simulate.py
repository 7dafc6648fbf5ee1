"""``proctor simulate``: replay adaptive sessions on recorded responses.

For every model of a response matrix (``--responses``, the format of the MMLU-Pro
``responses.csv`` in the shared data) and every policy, ``--runs`` sessions are replayed
by :func:`bank.adaptive.replay.replay`: the policy asks for a stratum, an unseen item of
that stratum the model answered is drawn at random (``model-assisted``: with probability
by its predicted information) and its recorded score arrives at once.
Each session's estimate is compared with the model's full-set score (its mean over every
item it answered). Items' strata come from ``--items`` (JSONL, ``items.jsonl``).

Item parameters for ``neyman-irt`` and ``model-assisted`` come from ``--history``
(earlier models' responses, none of which may be a simulated model) or, without it, from
fits that leave the simulated model out: no policy learns from the responses it is scored
on. Items' disciplines (the ``category`` field of ``--items``, whatever ``--strata`` is)
give the per-discipline estimates; ``model-assisted``'s rank-aware stopping rule sees the
other models' full-set scores as the leaderboard.

Input problems are printed as ``error: file:line: field: what`` and exit with status 1.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from bank.adaptive.bounds import Bound
from bank.adaptive.policy import AdaptiveConfig, Policy
from bank.adaptive.recorded import (
    STRATUM_FIELDS,
    RecordedInputError,
    ResponseMatrix,
    check_coverage,
    load_items,
    load_responses,
)
from bank.adaptive.replay import IRT_POLICIES, POINTS, PolicySummary, ReplayResult, replay
from bank.formats.input_problems import InputProblem
from judge.numbers import format_number, json_float
from server.cli.groups import command_registrar
from server.cli.options import JsonFlag
from server.cli.output import CommandInputError, exit_on_input_error, stderr, table_console
from server.sessions.limits import AdaptiveDefaults

ALL_POLICIES = (
    Policy.FULL,
    Policy.UNIFORM,
    Policy.PROPORTIONAL,
    Policy.NEYMAN,
    Policy.NEYMAN_IRT,
    Policy.MODEL_ASSISTED,
)
DEFAULT_STRATA = "discipline,type"
DEFAULT_TARGET_POINTS = AdaptiveDefaults().target_halfwidth
T = TypeVar("T")


def _check_delta(value: float) -> float:
    if not 0.0 < value < 1.0:
        raise typer.BadParameter(f"{value:g} is not in (0, 1)")
    return value


def _check_halfwidth(value: float) -> float:
    if not value > 0.0:
        raise typer.BadParameter(f"{value:g} is not a positive number of points")
    return value


def _check_strata(value: str) -> str:
    _strata_fields(value)
    return value


def _strata_fields(value: str) -> tuple[str, ...]:
    fields = tuple(f.strip() for f in value.split(",") if f.strip())
    if not fields:
        raise typer.BadParameter(f"name at least one of {', '.join(STRATUM_FIELDS)}")
    unknown = [f for f in fields if f not in STRATUM_FIELDS]
    if unknown:
        raise typer.BadParameter(
            f"unknown field {unknown[0]!r} (choose from {', '.join(STRATUM_FIELDS)})"
        )
    if len(set(fields)) != len(fields):
        raise typer.BadParameter("a field is named twice")
    return fields


def simulate_command(
    responses: Annotated[
        Path,
        typer.Option(
            "--responses",
            help="Response matrix (CSV): a 'model' column, then one column per item id; "
            "cells 1, 0, a score in [0, 1], or empty (not answered).",
            show_default=False,
        ),
    ],
    items: Annotated[
        Path,
        typer.Option(
            "--items",
            help="Items (JSONL): question_id, category (discipline), src (sub-discipline), "
            "type/qtype (else 'mc').",
            show_default=False,
        ),
    ],
    history: Annotated[
        Path | None,
        typer.Option(
            "--history",
            help="Responses (CSV, same format) of earlier models that give the item "
            "parameters for neyman-irt and model-assisted; none may appear in --responses. "
            "Default: fit them leaving the simulated model out.",
        ),
    ] = None,
    policy: Annotated[
        list[Policy] | None,
        typer.Option(
            "--policy",
            help="A policy to replay; repeat for several. Default: all six, in the order "
            "full, uniform, proportional, neyman, neyman-irt, model-assisted. 'uniform' "
            "ignores the strata; 'neyman-irt' also bands each stratum by item difficulty; "
            "'model-assisted' draws items with probability by their predicted information, "
            "estimates with the difference estimator and also stops when the model's place "
            "among the other models is settled.",
            show_default=False,
        ),
    ] = None,
    target_halfwidth: Annotated[
        float,
        typer.Option(
            "--target-halfwidth",
            help="Stop once the interval's half-width is at most this, in score points "
            "(0-100 scale); the default is the server's for adaptive sessions.",
            callback=_check_halfwidth,
        ),
    ] = DEFAULT_TARGET_POINTS,
    delta: Annotated[
        float,
        typer.Option(
            "--delta",
            help="Error probability of the interval, in (0, 1), over all checks made.",
            callback=_check_delta,
        ),
    ] = 0.05,
    bound: Annotated[
        Bound,
        typer.Option(
            "--bound",
            help="The interval: hoeffding-serfling (guaranteed, the design's rule), "
            "bernstein-serfling (guaranteed, adapts to small variances), or normal "
            "(asymptotic; the variance-adaptive one). model-assisted always uses normal, "
            "on its estimator's variance.",
        ),
    ] = Bound.HOEFFDING_SERFLING,
    budget: Annotated[
        int,
        typer.Option("--budget", min=1, help="Session size: the most items a session asks."),
    ] = 1000,
    runs: Annotated[
        int, typer.Option("--runs", min=1, help="Sessions per model and policy.")
    ] = 200,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the draws.")] = 0,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            min=1,
            help="Worker processes (results do not depend on it). Default: the CPU count.",
            show_default=False,
        ),
    ] = None,
    strata: Annotated[
        str,
        typer.Option(
            "--strata",
            help=f"Comma-separated fields that form an item's stratum, among "
            f"{', '.join(STRATUM_FIELDS)}.",
            callback=_check_strata,
        ),
    ] = DEFAULT_STRATA,
    as_json: JsonFlag = False,
) -> None:
    """Replay adaptive sessions on recorded responses.

    Compares each policy's estimates with the full-set scores: items used, MAE (overall
    and per discipline), rank correlations, interval coverage, why sessions stopped and
    the largest share of sessions given one same item."""
    policies = list(dict.fromkeys(policy or ALL_POLICIES))
    fields = _strata_fields(strata)
    with exit_on_input_error():
        setup = _prepare(responses, items, history, policies, fields)
        config = AdaptiveConfig(
            budget=budget, target_halfwidth=target_halfwidth / POINTS, delta=delta, bound=bound
        )
        result = _replay(setup, policies, config, runs, seed, jobs or os.cpu_count() or 1)
    report = _Report(setup, fields, result, seed, target_halfwidth)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2, allow_nan=False))
    else:
        report.render(table_console())


register = command_registrar(
    "simulate",
    simulate_command,
    "proctor simulate --responses responses.csv --items items.jsonl --runs 50",
)


@dataclass(frozen=True, slots=True)
class _Setup:
    responses_path: Path
    items_path: Path
    history_path: Path | None
    responses: ResponseMatrix
    history: ResponseMatrix | None
    strata: list[str]
    """The stratum of each response column."""
    disciplines: list[str]
    """The discipline of each response column."""


def _prepare(
    responses_path: Path,
    items_path: Path,
    history_path: Path | None,
    policies: list[Policy],
    fields: tuple[str, ...],
) -> _Setup:
    responses = _load(load_responses, responses_path)
    items = _load(load_items, items_path)
    try:
        check_coverage(
            responses, items, responses_path=str(responses_path), items_path=str(items_path)
        )
    except RecordedInputError as error:
        raise CommandInputError(*(str(p) for p in error.errors)) from None
    _check_responses(responses, responses_path)
    history = None
    if history_path is not None:
        history = _load(load_responses, history_path)
        _check_history(history, history_path, responses, responses_path)
    elif len(responses.models) < 3 and (irt := [p for p in policies if p in IRT_POLICIES]):
        raise CommandInputError(
            _problem(
                responses_path,
                "model",
                f"{' and '.join(irt)} without --history need{'s' if len(irt) == 1 else ''} "
                "at least three models (item parameters are fitted leaving the simulated "
                "model out)",
            )
        )
    strata = [items[item].stratum(fields) for item in responses.item_ids]
    disciplines = [items[item].discipline for item in responses.item_ids]
    return _Setup(responses_path, items_path, history_path, responses, history, strata, disciplines)


def _load(loader: Callable[[Path], T], path: Path) -> T:
    try:
        return loader(path)
    except OSError as error:
        raise CommandInputError(f"{path}: {error.strerror or error}") from None
    except RecordedInputError as error:
        lines = [str(p) for p in error.errors]
        if len(lines) > 50:
            lines = [*lines[:50], f"... and {len(lines) - 50} more"]
        raise CommandInputError(*lines) from None


def _problem(path: Path, field: str, message: str) -> str:
    return str(InputProblem(str(path), None, field, message))


def _check_responses(responses: ResponseMatrix, path: Path) -> None:
    if len(responses.models) < 2:
        raise CommandInputError(
            _problem(path, "model", f"{len(responses.models)} model; the replay ranks at least two")
        )
    answered = (~np.isnan(responses.scores)).sum(axis=1)
    empty = [m for m, n in zip(responses.models, answered, strict=True) if n == 0]
    if empty:
        raise CommandInputError(
            *(_problem(path, "model", f"{m!r} answered no item") for m in empty)
        )


def _check_history(
    history: ResponseMatrix, path: Path, responses: ResponseMatrix, responses_path: Path
) -> None:
    simulated = set(responses.models)
    shared = [m for m in history.models if m in simulated]
    if shared:
        names = ", ".join(repr(m) for m in shared[:5]) + (" ..." if len(shared) > 5 else "")
        raise CommandInputError(
            _problem(
                path,
                "model",
                f"{names} also in {responses_path}: the item parameters must not come from "
                "the models the policies are scored on",
            )
        )
    if len(history.models) < 2:
        raise CommandInputError(
            _problem(path, "model", "at least two models are needed to fit item parameters")
        )
    known = set(history.item_ids)
    if not any(item in known for item in responses.item_ids):
        raise CommandInputError(
            _problem(path, "file", f"no item id in common with {responses_path}")
        )


def _replay(
    setup: _Setup,
    policies: list[Policy],
    config: AdaptiveConfig,
    runs: int,
    seed: int,
    jobs: int,
) -> ReplayResult:
    n_models = len(setup.responses.models)
    pending = [str(p) for p in policies]
    started = time.monotonic()

    def label() -> str:
        done = len(policies) - len(pending)
        return (
            f"replaying {pending[0]} ({done + 1}/{len(policies)}): {runs} runs x {n_models} models"
        )

    with stderr.status(label()) as status:

        def progress(name: str, sessions: int) -> None:
            nonlocal started
            now = time.monotonic()
            stderr.print(f"{name}: {sessions} sessions in {now - started:.1f} s", markup=False)
            started = now
            if name in pending:
                pending.remove(name)
            if pending:
                status.update(label())

        try:
            return replay(
                setup.responses,
                setup.strata,
                policies=policies,
                config=config,
                runs=runs,
                seed=seed,
                history=setup.history,
                disciplines=setup.disciplines,
                progress=progress,
                jobs=jobs,
            )
        except ValueError as error:
            raise CommandInputError(f"{setup.responses_path}: {error}") from None


@dataclass(frozen=True, slots=True)
class _Report:
    setup: _Setup
    fields: tuple[str, ...]
    result: ReplayResult
    seed: int
    target_points: float
    """The target half-width as given, not via the [0, 1] scale."""

    def config_json(self) -> dict[str, Any]:
        cfg = self.result.config
        setup = self.setup
        return {
            "responses": str(setup.responses_path),
            "items": str(setup.items_path),
            "history": None if setup.history_path is None else str(setup.history_path),
            "policies": list(self.result.policies),
            "bound": str(cfg.bound),
            "delta": cfg.delta,
            "target_halfwidth": self.target_points,
            "budget": cfg.budget,
            "runs": self.result.runs,
            "seed": self.seed,
            "strata": list(self.fields),
            "n_strata": len(set(setup.strata)),
            "n_disciplines": len(set(setup.disciplines)),
            "n_models": len(setup.responses.models),
            "n_items": len(setup.responses.item_ids),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config_json(),
            "models": list(self.setup.responses.models),
            "full_scores": self.result.full_scores,
            "policies": {name: _summary_json(s) for name, s in self.result.policies.items()},
        }

    def render(self, console: Console) -> None:
        cfg = self.result.config
        setup = self.setup
        history = (
            f"item parameters from {setup.history_path} ({len(setup.history.models)} models)"
            if setup.history is not None and setup.history_path is not None
            else "item parameters fitted leaving the simulated model out"
        )
        console.print(
            f"{setup.responses_path}: {len(setup.responses.models)} models x "
            f"{len(setup.responses.item_ids)} items; strata {','.join(self.fields)} "
            f"({len(set(setup.strata))}); {history}",
            markup=False,
        )
        console.print(
            f"bound {cfg.bound}, delta {cfg.delta:g}, target half-width "
            f"{self.target_points:g} points, budget {cfg.budget}, "
            f"runs {self.result.runs}, seed {self.seed}",
            markup=False,
        )
        console.print(self.table())

    def table(self) -> Table:
        table = Table(
            title="Policies against the full-set scores",
            title_justify="left",
            caption="MAE and half-width in score points (0-100); MAE by discipline: over "
            "every discipline a session gave items of; Spearman and Kendall: each run's "
            "ranking against the full-set ranking, averaged; coverage: share of sessions "
            "whose interval holds the full-set score; stopped precise / settled: share of "
            "sessions stopped by the half-width / by the model's settled place among the "
            "others; max exposure: the largest share of sessions given one same item",
            caption_justify="left",
        )
        table.add_column("policy", no_wrap=True)
        for name in (
            "items mean",
            "items p95",
            "saved vs full",
            "MAE",
            "MAE by discipline",
            "Spearman",
            "Kendall",
            "coverage",
            "half-width",
            "stopped precise",
            "stopped settled",
            "max exposure",
        ):
            table.add_column(name, justify="right")
        for name, s in self.result.policies.items():
            table.add_row(
                name,
                f"{s.items_mean:.1f}",
                f"{s.items_p95:.0f}",
                f"{s.saved_vs_full * 100:.1f}%",
                format_number(s.mae, 2),
                format_number(s.discipline_mae, 2),
                format_number(s.spearman, 3),
                format_number(s.kendall, 3),
                f"{s.coverage * 100:.1f}%",
                format_number(s.halfwidth_mean, 2),
                f"{s.stopped_precise * 100:.0f}%",
                f"{s.stopped_settled * 100:.0f}%",
                f"{s.max_exposure * 100:.1f}%",
            )
        return table


def _summary_json(s: PolicySummary) -> dict[str, float | None]:
    """The summary's figures; an undefined one (NaN: a constant ranking, no discipline
    estimate; infinite: a stratum never sampled) becomes null."""
    return {
        "items_mean": json_float(s.items_mean),
        "saved_vs_full": json_float(s.saved_vs_full),
        "mae": json_float(s.mae),
        "spearman": json_float(s.spearman),
        "kendall": json_float(s.kendall),
        "coverage": json_float(s.coverage),
        "items_p95": json_float(s.items_p95),
        "halfwidth_mean": json_float(s.halfwidth_mean),
        "stopped_precise": json_float(s.stopped_precise),
        "stopped_settled": json_float(s.stopped_settled),
        "discipline_mae": json_float(s.discipline_mae),
        "max_exposure": json_float(s.max_exposure),
    }
