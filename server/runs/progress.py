"""A run's progress as its readers see it: items done of the total, pace, ETA, tokens,
cost and failures by kind; per session, items answered of its size and its state.

Nothing here moves with a verdict: counts of answers, never of correct ones (a vendor
sees of a run what it sees of its sessions).
"""

from __future__ import annotations

from datetime import datetime

from server.auth.permissions import Principal
from server.runs.schemas import RunOut, RunSessionOut
from server.runs.service import RunRecord
from server.scoring.visibility import visible_state


def run_out(
    record: RunRecord, *, principal: Principal, default_items: int, now: datetime
) -> RunOut:
    """``record`` as ``principal`` reads it; a slot not opened yet counts the run's
    ``n_items`` (or the server's ``default_items``) towards the total."""
    run = record.run
    progress: list[RunSessionOut] = []
    done = total = 0
    for slot in record.slots:
        session = record.sessions.get(slot.session_id) if slot.session_id else None
        if session is None:
            progress.append(RunSessionOut(session_id=None, done=0, total=None, state=None))
            total += run.n_items or default_items
            continue
        state = visible_state(principal, session.state)
        progress.append(
            RunSessionOut(
                session_id=session.id, done=session.n_completed, total=session.n_items, state=state
            )
        )
        done += session.n_completed
        total += session.n_items
    per_minute = _pace(run.answers, run.started_at, run.ended_at or now)
    eta = None
    if per_minute and not run.ended_at:
        eta = round(max(0, total - done) / per_minute * 60, 1)
    return RunOut(
        id=run.id,
        model_id=run.model_id,
        state=run.state,
        mode=run.mode,
        sessions=run.sessions,
        n_items=run.n_items,
        cost_cap_usd=run.cost_cap_usd,
        items_done=done,
        items_total=total,
        answers_per_minute=per_minute,
        eta_s=eta,
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
        cost_usd=round(run.cost_usd, 6),
        failures=dict(run.failures or {}),
        progress=progress,
        created_at=run.created_at,
        started_at=run.started_at,
        ended_at=run.ended_at,
        stop_reason=run.stop_reason,
    )


def _pace(answers: int, started: datetime | None, until: datetime) -> float | None:
    """Answers per minute since ``started`` (None before a start or an answer)."""
    if started is None or answers == 0:
        return None
    minutes = (until - started).total_seconds() / 60
    return round(answers / minutes, 2) if minutes > 0 else None
