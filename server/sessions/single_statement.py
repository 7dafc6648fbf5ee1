"""The common delivery and answer, each in one PostgreSQL statement (data-modifying CTEs).

``server.sessions.service`` runs these first on PostgreSQL. Each one does its writes only
when every rule of the general path holds for the common case, checked inside the
statement on the locked session row:

* ``deliver``: the lease is free for this token (the same condition as ``_drive``), the
  session is created or active, before its deadline, not adaptive, with room in its
  pending window and items left. Then, in one statement: the lease is taken, the session
  becomes active with one more item delivered, the item at the old ``n_delivered`` is read
  and its exposure is marked delivered.
* ``answer``: the lease is free for this token, the session is active and before its
  deadline, ``position`` is the oldest pending one and ``item_id`` is the item there.
  Then, in one statement: the lease is taken, ``n_completed`` advances (the session
  becomes answered with its last answer) and the answer row is inserted.

When the statement changes nothing, the caller runs the general path, which decides (and
raises) exactly as before, in the same transaction: nothing was written. Two requests on
one session still run one after the other (the UPDATE locks the row; the second
re-checks its conditions on the committed row, as ``_drive`` does).

The statements are built once (``bindparam``), so SQLAlchemy's compiled cache and
asyncpg's prepared statements serve every request.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from functools import cache
from typing import Any, cast

from sqlalchemy import (
    Boolean,
    Float,
    Integer,
    Select,
    String,
    Table,
    and_,
    bindparam,
    case,
    exists,
    func,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.dml import ReturningInsert

from bank.models import Exposure, Item, SampleItem
from server.auth.models import RevokedToken
from server.auth.permissions import Permission, Principal
from server.sessions.models import Answer, EvalSession
from server.sessions.modes import modes_where
from server.sessions.states import SessionState
from server.sessions.submission import AnswerSubmission

_S = cast(Table, EvalSession.__table__)
_SI = cast(Table, SampleItem.__table__)
_EX = cast(Table, Exposure.__table__)
_AN = cast(Table, Answer.__table__)
_IT = cast(Table, Item.__table__)
_RT = cast(Table, RevokedToken.__table__)
# Parameters are named p_*: a name equal to a column's would also be taken as a value to
# SET by the UPDATEs.


def applies(db: AsyncSession) -> bool:
    """Whether ``db`` is on PostgreSQL (SQLite has no data-modifying CTEs)."""
    bind = db.get_bind()
    return bind.dialect.name == "postgresql"


def _param(name: str, column: Any) -> Any:
    return bindparam(name, type_=column.type)


def _driven_by_token() -> list[Any]:
    """The session ``session_id`` of the principal's organisation (any with ``any_org``)
    whose lease is free for token ``jti``: ``service._drive``'s condition."""
    now = _param("p_now", _S.c.lease_expires_at)
    return [
        _S.c.id == _param("p_session_id", _S.c.id),
        or_(bindparam("p_any_org", type_=Boolean), _S.c.org_id == _param("p_org_id", _S.c.org_id)),
        or_(
            _S.c.lease_jti.is_(None),
            _S.c.lease_jti == _param("p_jti", _S.c.lease_jti),
            _S.c.lease_expires_at < now,
            exists().where(_RT.c.jti == _S.c.lease_jti),
        ),
    ]


def _lease_values() -> dict[str, Any]:
    return {
        "lease_jti": _param("p_jti", _S.c.lease_jti),
        "lease_expires_at": _param("p_lease_until", _S.c.lease_expires_at),
    }


def _driving_params(
    principal: Principal, session_id: uuid.UUID, now: datetime, lease_idle_s: float
) -> dict[str, Any]:
    return {
        "p_session_id": session_id,
        "p_any_org": principal.can(Permission.ANY_ORG),
        "p_org_id": principal.org_id,
        "p_jti": principal.jti,
        "p_now": now,
        "p_lease_until": now + timedelta(seconds=lease_idle_s),
    }


@cache
def _deliver_statement() -> Select[Any]:
    now = _param("p_now", _S.c.deadline_at)
    open_states = [SessionState.CREATED.value, SessionState.ACTIVE.value]
    delivering = (
        update(_S)
        .where(
            *_driven_by_token(),
            _S.c.state.in_(open_states),
            _S.c.deadline_at > now,
            _S.c.mode.in_(modes_where(lambda traits: traits.delivered_in_one_statement)),
            _S.c.n_delivered - _S.c.n_completed < _S.c.pending_window,
            _S.c.n_delivered < _S.c.n_items,
        )
        .values(
            **_lease_values(),
            n_delivered=_S.c.n_delivered + 1,
            state=SessionState.ACTIVE.value,
        )
        .returning(
            _S.c.org_id,
            _S.c.sample_id,
            _S.c.mode,
            (_S.c.n_delivered - 1).label("position"),
        )
        .cte("delivering")
    )
    item = (
        select(
            delivering.c.org_id,
            delivering.c.mode,
            delivering.c.position,
            _SI.c.family_id,
            _IT.c.id,
            _IT.c.question,
            _IT.c.options,
            _IT.c.qtype,
            _IT.c.discipline,
            _IT.c.language,
        )
        .select_from(delivering)
        .join(
            _SI,
            and_(
                _SI.c.sample_id == delivering.c.sample_id, _SI.c.position == delivering.c.position
            ),
        )
        .join(_IT, _IT.c.id == _SI.c.item_id)
        .cte("item")
    )
    marked = (
        update(_EX)
        .where(
            _EX.c.org_id == item.c.org_id,
            _EX.c.family_id == item.c.family_id,
            _EX.c.delivered_at.is_(None),
        )
        .values(delivered_at=_param("p_now", _EX.c.delivered_at))
        .returning(_EX.c.family_id)
        .cte("marked")
    )
    n_marked = select(func.count()).select_from(marked).scalar_subquery()
    return select(item, n_marked.label("n_marked"))


async def deliver(
    db: AsyncSession,
    *,
    principal: Principal,
    session_id: uuid.UUID,
    now: datetime,
    lease_idle_s: float,
) -> Any | None:
    """Deliver the next item if the common case holds (see the module docstring): the
    row (``position``, ``mode``, the item's ``id``, ``question``, ``options``, ``qtype``,
    ``discipline``, ``language``, ``n_marked``: 1 if its exposure was marked delivered),
    else None and nothing was written."""
    params = _driving_params(principal, session_id, now, lease_idle_s)
    return (await db.execute(_deliver_statement(), params)).one_or_none()


@cache
def _answer_statement() -> ReturningInsert[Any]:
    now = _param("p_now", _S.c.deadline_at)
    position = bindparam("p_position", type_=Integer)
    item_id = _param("p_item_id", _AN.c.item_id)
    last = position + 1 == _S.c.n_items
    answering = (
        update(_S)
        .where(
            *_driven_by_token(),
            _S.c.state == SessionState.ACTIVE.value,
            _S.c.deadline_at > now,
            # a drive permission is checked on the general path
            _S.c.mode.in_(modes_where(lambda traits: traits.delivered_in_one_statement)),
            _S.c.n_completed == position,
            _S.c.n_delivered > position,
            exists().where(
                _SI.c.sample_id == _S.c.sample_id,
                _SI.c.position == position,
                _SI.c.item_id == item_id,
            ),
        )
        .values(
            **_lease_values(),
            n_completed=position + 1,
            state=case((last, SessionState.ANSWERED.value), else_=_S.c.state),
            ended_at=case((last, now), else_=_S.c.ended_at),
        )
        .returning(_S.c.id, _S.c.org_id, _S.c.sample_id)
        .cte("answering")
    )
    delivered_at = (
        select(_EX.c.delivered_at)
        .select_from(_SI)
        .join(_EX, and_(_EX.c.org_id == answering.c.org_id, _EX.c.family_id == _SI.c.family_id))
        .where(_SI.c.sample_id == answering.c.sample_id, _SI.c.position == position)
        .scalar_subquery()
    )
    columns = [
        "session_id",
        "position",
        "item_id",
        "answer",
        "reasoning",
        "submitted_by",
        "delivered_at",
        "submitted_at",
        "prompt_tokens",
        "completion_tokens",
        "finish_reason",
        "reported_latency_s",
    ]
    rows = select(
        answering.c.id,
        position,
        item_id,
        _param("p_answer", _AN.c.answer),
        _param("p_reasoning", _AN.c.reasoning),
        _param("p_jti", _AN.c.submitted_by),
        func.coalesce(delivered_at, now),
        now,
        bindparam("p_prompt_tokens", type_=Integer),
        bindparam("p_completion_tokens", type_=Integer),
        bindparam("p_finish_reason", type_=String),
        bindparam("p_reported_latency_s", type_=Float),
    ).select_from(answering)
    return insert(_AN).from_select(columns, rows).returning(literal_column("1"))


async def answer(
    db: AsyncSession,
    *,
    principal: Principal,
    session_id: uuid.UUID,
    now: datetime,
    lease_idle_s: float,
    submission: AnswerSubmission,
) -> bool:
    """Accept ``submission`` (as stored: ``AnswerSubmission.with_trace_apart``) if the
    common case holds (see the module docstring); False, and nothing was written,
    otherwise."""
    params = _driving_params(principal, session_id, now, lease_idle_s) | {
        "p_position": submission.position,
        "p_item_id": submission.item_id,
        "p_answer": submission.answer,
        "p_reasoning": submission.reasoning,
        "p_prompt_tokens": submission.prompt_tokens,
        "p_completion_tokens": submission.completion_tokens,
        "p_finish_reason": submission.finish_reason,
        "p_reported_latency_s": submission.model_latency_s,
    }
    return (await db.execute(_answer_statement(), params)).first() is not None
