"""An adaptive session's policy state, rebuilt from the database for one request, behind
one protocol (``PolicyState``) so that ``server.sessions.adaptive`` drives every policy
with the same code.

Two implementations: the stratified policies of ``bank.adaptive.policy`` (``neyman``,
``neyman-irt``, ``full``: the next stratum, then its first undelivered item) and
``model-assisted`` (``bank.adaptive.assisted``: the next item drawn with the policy's
probabilities, and the draw stored for the estimator). The rebuild reads the pool once
(its size is the budget: no separate count), the delivered positions as the allocation,
and the scores the caller passes (``server.scoring.effective``: the leaderboard's rule).
"""

from __future__ import annotations

import math
import secrets
import uuid
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bank.adaptive.assisted import AssistedState, Draw
from bank.adaptive.bounds import Bound
from bank.adaptive.estimator import StratifiedEstimate
from bank.adaptive.irt import ItemParameters
from bank.adaptive.policy import AdaptiveConfig, AdaptiveState, Decision, Policy, assign_strata
from bank.adaptive.stopping import Neighbour
from bank.models import Item, SampleItem
from server.sessions import assisted
from server.sessions.models import AdaptiveRun, Answer, EvalSession

__all__ = ["Estimate", "Pick", "PolicyState", "config_of", "load_policy"]


@dataclass(frozen=True, slots=True)
class Pick:
    """The pool position to deliver next, and (``model-assisted``) how it was drawn."""

    position: int
    draw: Draw | None = None


@dataclass(frozen=True, slots=True)
class Estimate:
    """The session's decision now (estimate, half-width, stop) and, for policies whose
    strata are disciplines' parts, each discipline's estimate: computed once."""

    decision: Decision
    disciplines: dict[str, StratifiedEstimate] | None = None
    """None for policies whose strata are not disciplines' parts; empty until a
    discipline has an estimate."""


class PolicyState(Protocol):
    """One adaptive policy's state for one request."""

    wants_neighbours: ClassVar[bool]
    """Whether ``decision`` reads the other models' scores (the rank-aware stop)."""

    @property
    def budget(self) -> int:
        """The pool's size."""

    @property
    def n_scored(self) -> int:
        """Delivered items with a score."""

    def check_index(self) -> int:
        """How many check points of the schedule the scored items have passed."""

    def decision(self, *, neighbours: Sequence[Neighbour]) -> Decision:
        """The estimate and its half-width now, and whether to stop."""

    def next_item(self, *, n_delivered: int) -> Pick | None:
        """What to deliver at position ``n_delivered``; None: nothing more to deliver."""

    def estimate(self) -> Estimate:
        """The decision now, with the per-discipline estimates where the policy has them."""


def config_of(run: AdaptiveRun, *, budget: int) -> AdaptiveConfig:
    """The policy's configuration as the session recorded it when it opened."""
    return AdaptiveConfig(
        policy=Policy(run.policy),
        budget=budget,
        target_halfwidth=run.target_halfwidth,
        delta=run.delta,
        bound=Bound(run.bound),
        pilot=run.pilot,
        check_every=run.check_every,
    )


@dataclass(frozen=True, slots=True)
class _PoolItem:
    position: int
    item_id: uuid.UUID
    stratum: Hashable


@dataclass(slots=True)
class _Stratified:
    """``neyman``, ``neyman-irt`` and ``full``: the next stratum's first undelivered item."""

    wants_neighbours: ClassVar[bool] = False
    state: AdaptiveState
    pool: list[_PoolItem]

    @property
    def budget(self) -> int:
        return len(self.pool)

    @property
    def n_scored(self) -> int:
        return self.state.n_scored

    def check_index(self) -> int:
        return self.state.check_index()

    def decision(self, *, neighbours: Sequence[Neighbour]) -> Decision:
        return self.state.decision()

    def next_item(self, *, n_delivered: int) -> Pick | None:
        key = self.state.next_stratum()
        if key is None:
            return None
        chosen = min(
            (p for p in self.pool if p.position >= n_delivered and p.stratum == key),
            key=lambda p: p.position,
        )
        return Pick(chosen.position)

    def estimate(self) -> Estimate:
        return Estimate(self.state.decision())


@dataclass(slots=True)
class _Assisted:
    """``model-assisted``: the next item drawn with the policy's probabilities (from the
    operating system's randomness); pool index = position."""

    wants_neighbours: ClassVar[bool] = True
    state: AssistedState

    @property
    def budget(self) -> int:
        return len(self.state.items)

    @property
    def n_scored(self) -> int:
        return self.state.n_scored

    def check_index(self) -> int:
        return self.state.check_index()

    def decision(self, *, neighbours: Sequence[Neighbour]) -> Decision:
        return self.state.decision(neighbours=neighbours)

    def next_item(self, *, n_delivered: int) -> Pick | None:
        draw = self.state.next_draw(np.random.default_rng(secrets.randbits(128)))
        return None if draw is None else Pick(draw.item, draw)

    def estimate(self) -> Estimate:
        full = self.state.estimate()
        return Estimate(
            self.state.decision_on(full.overall),
            {name: d for name, d in full.disciplines.items() if not math.isnan(d.mean)},
        )


async def load_policy(
    db: AsyncSession, *, record: EvalSession, run: AdaptiveRun, scores: Mapping[int, float]
) -> PolicyState:
    """The state of ``record``'s policy with ``scores`` (position -> score in [0, 1])."""
    pool = await _pool_rows(db, record=record)
    config = config_of(run, budget=len(pool))
    if config.policy is Policy.MODEL_ASSISTED:
        return _Assisted(
            assisted.restore(
                config,
                pool,
                parameters=run.item_parameters or {},
                draws=await assisted.load_draws(db, session_id=record.id),
                scores=scores,
                n_delivered=record.n_delivered,
            )
        )
    return await _stratified(db, record=record, run=run, rows=pool, config=config, scores=scores)


async def _pool_rows(db: AsyncSession, *, record: EvalSession) -> list[assisted.PoolRow]:
    """The session's pool in position order."""
    rows = (
        await db.execute(
            select(SampleItem.position, SampleItem.item_id, Item.discipline, Item.qtype)
            .join(Item, Item.id == SampleItem.item_id)
            .where(SampleItem.sample_id == record.sample_id)
            .order_by(SampleItem.position)
        )
    ).all()
    return [assisted.PoolRow(r.position, r.item_id, r.discipline, r.qtype) for r in rows]


async def _stratified(
    db: AsyncSession,
    *,
    record: EvalSession,
    run: AdaptiveRun,
    rows: list[assisted.PoolRow],
    config: AdaptiveConfig,
    scores: Mapping[int, float],
) -> _Stratified:
    """Strata of the whole pool (the session's population), the delivered positions as
    allocated, ``scores`` as the scores."""
    params = run.item_parameters or {}
    difficulty = [params[str(r.item_id)][1] if str(r.item_id) in params else None for r in rows]
    keys = assign_strata(
        [(r.discipline, r.qtype) for r in rows],
        policy=config.policy,
        bands=config.bands,
        difficulty=difficulty if params else None,
    )
    pool = [_PoolItem(r.position, r.item_id, key) for r, key in zip(rows, keys, strict=True)]
    sizes: dict[Hashable, int] = {}
    members: dict[Hashable, list[str]] = {}
    for item in pool:
        sizes[item.stratum] = sizes.get(item.stratum, 0) + 1
        members.setdefault(item.stratum, []).append(str(item.item_id))
    item_parameters = {
        key: ItemParameters(
            np.array([params[i][0] for i in ids if i in params], dtype=np.float64),
            np.array([params[i][1] for i in ids if i in params], dtype=np.float64),
        )
        for key, ids in members.items()
        if any(i in params for i in ids)
    }
    state = AdaptiveState.start(
        config,
        sizes,
        costs=await _stratum_costs(db, record=record, pool=pool),
        item_parameters=item_parameters,
    )
    by_position = {p.position: p for p in pool}
    for position in range(record.n_delivered):
        state.allocated(by_position[position].stratum)
    for position, score in scores.items():
        item = by_position[position]
        ab = params.get(str(item.item_id))
        state.record(item.stratum, score, item=(ab[0], ab[1]) if ab else None)
    return _Stratified(state, pool)


async def _stratum_costs(
    db: AsyncSession, *, record: EvalSession, pool: list[_PoolItem]
) -> dict[Hashable, float]:
    """c_h: the stratum's mean tokens per answer (as clients report them) relative to the
    session's mean; strata without reports cost 1."""
    rows = (
        await db.execute(
            select(Answer.position, Answer.prompt_tokens, Answer.completion_tokens).where(
                Answer.session_id == record.id,
                Answer.prompt_tokens.is_not(None),
                Answer.completion_tokens.is_not(None),
            )
        )
    ).all()
    if not rows:
        return {}
    by_position = {p.position: p.stratum for p in pool}
    spent: dict[Hashable, list[int]] = {}
    for position, prompt, completion in rows:
        spent.setdefault(by_position[position], []).append(prompt + completion)
    overall = sum(sum(v) for v in spent.values()) / sum(len(v) for v in spent.values())
    if overall <= 0:
        return {}
    return {key: max(sum(v) / len(v) / overall, 0.05) for key, v in spent.items()}
