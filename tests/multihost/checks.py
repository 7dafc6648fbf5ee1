"""What the multi-host run checks in the database, and the figures it prints.

The database is read as the owner role (it owns every table), never through the API: the
API is what is under test.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from clients.sdk.types import ALL_ANSWERED_STATES

ANSWERED = sorted(str(state) for state in ALL_ANSWERED_STATES)


async def create_database(superuser_dsn: str) -> None:
    """The two roles of deploy/README.md and the database owned by the owner role."""
    connection = await asyncpg.connect(superuser_dsn)
    try:
        await connection.execute("CREATE ROLE proctor_owner LOGIN PASSWORD 'proctor_owner'")
        await connection.execute("CREATE ROLE proctor_app LOGIN PASSWORD 'proctor_app'")
        await connection.execute("CREATE DATABASE proctor OWNER proctor_owner")
    finally:
        await connection.close()


# --------------------------------------------------------------------------- client log


@dataclass
class ClientLog:
    """The client host's event log (see :mod:`tests.multihost.client`)."""

    acks: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    model_id: str | None = None
    summary: dict[str, Any] | None = None
    started: float = 0.0

    @classmethod
    def read(cls, path: Path) -> ClientLog:
        log = cls()
        if not path.exists():
            return log
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.endswith("}"):
                continue  # a line being written
            event = json.loads(line)
            kind = event["event"]
            if kind == "ack":
                log.acks.append(event)
            elif kind == "call":
                log.calls.append(event)
            elif kind == "attempt":
                log.attempts.append(event)
            elif kind == "model":
                log.model_id = event["model_id"]
            elif kind == "done":
                log.summary = event["summary"]
            elif kind == "start":
                log.started = event["t"]
        return log


def count_acks(path: Path) -> tuple[int, int]:
    """Acknowledged answers in the client log so far, and the sessions they belong to."""
    acks, sessions = 0, set()
    try:
        with path.open("rb") as stream:
            for line in stream:
                if line.startswith(b'{"event": "ack"'):
                    acks += 1
                    sessions.add(line[29:65])  # '{"event": "ack", "session": "<uuid>"'
    except FileNotFoundError:
        pass
    return acks, len(sessions)


# --------------------------------------------------------------------------- database


async def scoring_drained(owner_dsn: str, model_id: str, deadline_s: float) -> dict[str, int]:
    """Wait until every scoring job of the model's sessions is done (or the deadline);
    the job counts by state at the end."""
    connection = await asyncpg.connect(owner_dsn)
    try:
        deadline = time.monotonic() + deadline_s
        while True:
            rows = await connection.fetch(
                "SELECT j.state, count(*) FROM scoring_jobs j JOIN eval_sessions s "
                "ON s.id = j.session_id WHERE s.model_id = $1 GROUP BY j.state",
                _uuid(model_id),
            )
            states = {row[0]: row[1] for row in rows}
            unscored = await connection.fetchval(
                "SELECT count(*) FROM eval_sessions WHERE model_id = $1 AND state <> 'scored'",
                _uuid(model_id),
            )
            if set(states) <= {"done"} and unscored == 0:
                return states
            if time.monotonic() > deadline:
                return {**states, "sessions not scored": unscored}
            await asyncio.sleep(0.5)
    finally:
        await connection.close()


@dataclass
class DbState:
    sessions: list[dict[str, Any]]
    answers: list[tuple[str, int, str]]
    verdicts: list[tuple[str, int, str, str]]
    jobs: list[tuple[str, int, str, str, str]]


async def read_state(owner_dsn: str, model_id: str) -> DbState:
    """The model's sessions, their answers, verdicts and scoring jobs."""
    connection = await asyncpg.connect(owner_dsn)
    try:
        model = _uuid(model_id)
        sessions = await connection.fetch(
            "SELECT id::text, state, n_items, n_completed FROM eval_sessions WHERE model_id = $1",
            model,
        )
        answers = await connection.fetch(
            "SELECT a.session_id::text, a.position, a.item_id::text FROM answers a "
            "JOIN eval_sessions s ON s.id = a.session_id WHERE s.model_id = $1",
            model,
        )
        verdicts = await connection.fetch(
            "SELECT v.session_id::text, v.position, v.judge, v.prompt_version FROM verdicts v "
            "JOIN eval_sessions s ON s.id = v.session_id WHERE s.model_id = $1",
            model,
        )
        jobs = await connection.fetch(
            "SELECT j.session_id::text, j.position, j.judge, j.prompt_version, j.state "
            "FROM scoring_jobs j JOIN eval_sessions s ON s.id = j.session_id "
            "WHERE s.model_id = $1",
            model,
        )
    finally:
        await connection.close()
    return DbState(
        [dict(row) for row in sessions],
        [(row[0], row[1], row[2]) for row in answers],
        [(row[0], row[1], row[2], row[3]) for row in verdicts],
        [(row[0], row[1], row[2], row[3], row[4]) for row in jobs],
    )


def _uuid(text: str) -> uuid.UUID:
    return uuid.UUID(text)


def check_run(log: ClientLog, db: DbState, sessions: int, items: int) -> list[str]:
    """Every failed check, as a sentence (empty: all passed)."""
    failures: list[str] = []
    if log.summary is None:
        failures.append("the client did not finish (no summary in its log)")
    elif log.summary["finished"] != sessions or log.summary["failed"]:
        errors = [s["error"] for s in log.summary["sessions"] if s["error"]]
        failures.append(
            f"client: {log.summary['finished']}/{sessions} sessions finished, "
            f"{log.summary['failed']} failed: {errors[:3]}"
        )
    acked = {(a["session"], a["position"], a["item_id"]) for a in log.acks}
    stored = set(db.answers)
    if acked - stored:
        failures.append(f"acknowledged answers not stored (lost): {sorted(acked - stored)[:5]}")
    if stored - acked:
        failures.append(f"stored answers never acknowledged: {sorted(stored - acked)[:5]}")
    return failures + check_stored(db, sessions, items) + check_verdicts(db)


def check_stored(db: DbState, sessions: int, items: int) -> list[str]:
    """``sessions`` sessions, each answered, every item once: ``sessions × items`` answers,
    no (session, position) stored twice."""
    failures: list[str] = []
    not_done = [s for s in db.sessions if s["state"] not in ANSWERED]
    incomplete = [s for s in db.sessions if s["n_completed"] != s["n_items"]]
    if len(db.sessions) != sessions or not_done or incomplete:
        failures.append(
            f"database: {len(db.sessions)} sessions (want {sessions}); not answered: "
            f"{[(s['id'], s['state']) for s in not_done][:3]}; incomplete: {len(incomplete)}"
        )
    twice = [key for key, n in Counter((s, p) for s, p, _ in db.answers).items() if n > 1]
    if twice:
        failures.append(f"answers stored more than once: {twice[:5]}")
    if len(db.answers) != sessions * items:
        failures.append(f"{len(db.answers)} answers stored, want {sessions * items}")
    return failures


def check_verdicts(db: DbState) -> list[str]:
    """Each answer: one verdict per (judge, prompt version) it has a scoring job for, every
    job done, no verdict without an answer."""
    failures: list[str] = []
    verdicts = Counter(db.verdicts)
    twice = [key for key, n in verdicts.items() if n > 1]
    if twice:
        failures.append(f"answers scored more than once: {twice[:5]}")
    jobs_by_answer: defaultdict[tuple[str, int], set[tuple[str, str]]] = defaultdict(set)
    for session, position, judge, version, _ in db.jobs:
        jobs_by_answer[(session, position)].add((judge, version))
    verdicts_by_answer: defaultdict[tuple[str, int], set[tuple[str, str]]] = defaultdict(set)
    for session, position, judge, version in verdicts:
        verdicts_by_answer[(session, position)].add((judge, version))
    answers = {(s, p) for s, p, _ in db.answers}
    unscored = [a for a in answers if not verdicts_by_answer.get(a)]
    if unscored:
        failures.append(f"{len(unscored)} answers without a verdict: {sorted(unscored)[:3]}")
    mismatched = [a for a in answers if verdicts_by_answer.get(a) != jobs_by_answer.get(a)]
    if mismatched:
        failures.append(f"{len(mismatched)} answers whose verdicts differ from their jobs")
    orphans = set(verdicts_by_answer) - answers
    if orphans:
        failures.append(f"verdicts without an answer: {sorted(orphans)[:3]}")
    open_jobs = Counter(state for *_, state in db.jobs if state != "done")
    if open_jobs:
        failures.append(f"scoring jobs not done: {dict(open_jobs)}")
    return failures


# --------------------------------------------------------------------------- figures


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (nearest rank); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def rate(times: Sequence[float], start: float, end: float) -> float:
    """Events per second in [start, end)."""
    if end <= start:
        return math.nan
    return sum(1 for t in times if start <= t < end) / (end - start)


def fault_figures(log: ClientLog, fault_at: float, fault_end: float | None) -> dict[str, Any]:
    """Throughput and latency around a fault at ``fault_at`` (wall time), which lasted until
    ``fault_end`` (None: it never ended, e.g. a killed host)."""
    times = sorted(a["t"] for a in log.acks)
    first, last = times[0], times[-1]
    before = rate(times, first, fault_at)
    after_start = fault_end if fault_end is not None else fault_at
    figures: dict[str, Any] = {
        "answers": len(times),
        "wall_s": last - log.started,
        "answers_per_s_before": before,
        "answers_per_s_after": rate(times, after_start, last),
    }
    if fault_end is not None:
        figures["answers_per_s_during"] = rate(times, fault_at, fault_end)
    later = [t for t in times if t >= fault_at]
    figures["s_to_first_ack_after_fault"] = (later[0] - fault_at) if later else math.nan
    figures["s_to_half_rate"] = _time_to_rate(times, fault_at, 0.5 * before)
    figures["s_until_every_session_answered_again"] = _every_session_back(log, fault_at)
    figures["longest_ack_gap_after_fault_s"] = max(
        (b - a for a, b in zip([fault_at, *later], later, strict=False)), default=math.nan
    )
    for kind in ("next", "answer"):
        durations = [c["dur"] for c in log.calls if c["kind"] == kind]
        figures[f"p99_{kind}_ms"] = 1000 * percentile(durations, 0.99)
        figures[f"p50_{kind}_ms"] = 1000 * percentile(durations, 0.50)
        calm = [c["dur"] for c in log.calls if c["kind"] == kind and c["t"] + c["dur"] < fault_at]
        figures[f"p99_{kind}_ms_before_fault"] = 1000 * percentile(calm, 0.99)
        figures[f"max_{kind}_ms"] = 1000 * max(durations, default=math.nan)
    statuses = Counter(str(a.get("status", a.get("error"))) for a in log.attempts)
    figures["attempts_by_status"] = dict(sorted(statuses.items()))
    figures["retried_answers_found_committed"] = sum(1 for a in log.acks if a["already"])
    return figures


def _time_to_rate(
    times: Sequence[float], since: float, target: float, window: float = 2.0
) -> float:
    """Seconds from ``since`` to the start of the first ``window``-second window (stepped by
    0.1 s) whose rate is at least ``target``."""
    t = since
    end = times[-1] if times else since
    while t + window <= end + 1e-9:
        if rate(times, t, t + window) >= target:
            return t - since
        t += 0.1
    return math.nan


def _every_session_back(log: ClientLog, since: float) -> float:
    """Seconds from ``since`` until every session that still had answers to give after it
    got one acknowledged."""
    first_after: dict[str, float] = {}
    for ack in log.acks:
        if ack["t"] >= since:
            first_after[ack["session"]] = min(first_after.get(ack["session"], ack["t"]), ack["t"])
    return max(first_after.values(), default=since) - since
