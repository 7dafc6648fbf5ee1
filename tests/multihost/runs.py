"""Run 3 of the multi-host run: a run the server drives, across two run-worker hosts, and
one of them dies mid-run.

The evaluator registers a model, gives it an endpoint (the client host's fake model on
``RUN_LLM_PORT``, a private address the deployment allows) and starts a run through the
proxy; ``proctor run-worker`` on ``runner1`` and ``runner2`` share it (the endpoint's
concurrency caps both together). Once ``--fault-at`` of the answers are in, the link of
the runner host driving more of the sessions goes down and every process on it is
killed. Checks: the run finishes; every session answered every item, each (session,
position) stored once; every answer scored once per judge; the fake model was asked at
most once per item plus once per call the dead host had in flight (an item is asked again
only if its answer was never acknowledged); the sessions the dead worker was driving were
held by the other within the lease (plus a poll and PostgreSQL ending its transactions).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx

from server.runs.states import SlotState
from tests.multihost import topology
from tests.multihost.checks import (
    DbState,
    check_stored,
    check_verdicts,
    read_state,
    scoring_drained,
)
from tests.multihost.cluster import (
    HOSTS,
    MODEL_PROFILE,
    RUN_LEASE_S,
    RUN_LLM_PORT,
    Cluster,
    wait_http,
)

RUNNERS = ("runner1", "runner2")
"""The run-worker hosts; the run kills the first."""
CONCURRENCY = 10
"""The endpoint's concurrency: sessions driven at once across both workers. Each worker has
room for all of them (``RUN_SLOTS_PER_WORKER``), so whichever dies, the other can take its
sessions over as soon as their leases run out."""
MODEL_LATENCY_MS = 50.0
RUN_TIMEOUT_S = 150.0
TAKE_OVER_SLACK_S = 10.0
"""Past the lease: the survivor's poll, PostgreSQL ending the dead host's transactions."""
ENDED = {"finished", "failed", "cancelled"}


@dataclass
class Sample:
    t: float
    items_done: int
    opened: int
    state: str


@dataclass
class RunThree:
    """What the orchestrator saw of the run, and what the checks found."""

    failures: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)


def start_runners(cluster: Cluster) -> None:
    """The fake model for runs and one run worker per runner host."""
    client = HOSTS["client"]
    cluster.start_fake_llm(
        "run-model-llm", client, "0.0.0.0", port=RUN_LLM_PORT, latency_ms=MODEL_LATENCY_MS
    )
    for host in RUNNERS:
        cluster.start_run_worker(host)
    wait_http(f"http://{client.address}:{RUN_LLM_PORT}/v1/models", "the fake model of runs")


def bearer(http: httpx.Client, key: str) -> dict[str, str]:
    token = http.post("/v1/auth/token", json={"api_key": key})
    token.raise_for_status()
    return {"Authorization": f"Bearer {token.json()['access_token']}"}


def start_run(http: httpx.Client, headers: dict[str, str], sessions: int, items: int) -> str:
    """Register a model, give it the endpoint, start its run; the run's id."""
    model = http.post(
        "/v1/models", json={"name": "multihost-run3", "api_snapshot": "v1"}, headers=headers
    )
    model.raise_for_status()
    model_id = model.json()["id"]
    endpoint = {
        "base_url": f"http://{HOSTS['client'].address}:{RUN_LLM_PORT}/v1",
        "model": MODEL_PROFILE,
        "concurrency": CONCURRENCY,
    }
    http.put(f"/v1/models/{model_id}/endpoint", json=endpoint, headers=headers).raise_for_status()
    body = {"model_id": model_id, "sessions": sessions, "n_items": items}
    run = http.post("/v1/runs", json=body, headers=headers)
    run.raise_for_status()
    return str(run.json()["id"])


def sample(
    http: httpx.Client, headers: dict[str, str], run_id: str
) -> tuple[Sample, dict[str, Any]]:
    """The run now: a sample of its progress, and its body."""
    run = http.get(f"/v1/runs/{run_id}", headers=headers)
    run.raise_for_status()
    body: dict[str, Any] = run.json()
    opened = sum(1 for p in body["progress"] if p["session_id"] is not None)
    return Sample(time.time(), body["items_done"], opened, body["state"]), body


def model_calls(cluster: Cluster) -> int:
    stats = httpx.get(f"http://{HOSTS['client'].address}:{RUN_LLM_PORT}/stats", timeout=10)
    return int(stats.json()["requests"])


def kill_runner(cluster: Cluster, host_name: str) -> int:
    """Cut ``host_name`` off (link first: no FIN or RST leaves it) and kill all on it; the
    pid of its run worker (part of the worker's lease owner name)."""
    worker = cluster.processes.pop(f"run-{host_name}")
    topology.set_link(HOSTS[host_name], up=False)
    topology.kill_namespace(HOSTS[host_name].netns)
    worker.wait(timeout=10)
    return worker.pid


def busiest_runner(cluster: Cluster, owner_dsn: str, run_id: str) -> str:
    """The runner host whose worker drives the most of the run's sessions now (so the kill
    always strands work, and the survivor has room for it: see ``RUN_SLOTS_PER_WORKER``)."""
    held = {
        host: asyncio.run(slots_held(owner_dsn, run_id, cluster.processes[f"run-{host}"].pid))
        for host in RUNNERS
    }
    return max(held, key=lambda host: held[host])


async def slots_held(owner_dsn: str, run_id: str, pid: int) -> int:
    """Slots of the run being driven under a lease of the worker with ``pid``."""
    connection = await asyncpg.connect(owner_dsn)
    try:
        held = await connection.fetchval(
            "SELECT count(*) FROM run_slots WHERE run_id = $1 AND state = $2 "
            "AND lease_owner LIKE $3",
            uuid.UUID(run_id),
            SlotState.DRIVING.value,
            f"%:{pid}:%",  # ``host:pid:random`` (server.runs.worker)
        )
    finally:
        await connection.close()
    return int(held)


def drive(
    cluster: Cluster, owner_dsn: str, evaluator_key: str, sessions: int, items: int,
    fault_at: float,
) -> tuple[RunThree, dict[str, Any], float]:  # fmt: skip
    """Start the run, kill runner1 at ``fault_at`` of the answers, follow it to its end and
    the dead worker's slots until another worker holds them."""
    seen = RunThree()
    total = sessions * items
    with httpx.Client(base_url=cluster.proxy_url, timeout=60) as http:
        headers = bearer(http, evaluator_key)
        run_id = start_run(http, headers, sessions, items)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        killed_at, dead_pid, orphaned = 0.0, 0, 0
        body: dict[str, Any] = {}
        while True:
            now, body = sample(http, headers, run_id)
            seen.samples.append(now)
            if not killed_at and now.items_done >= fault_at * total:
                seen.figures["model_calls_at_kill"] = model_calls(cluster)
                victim = busiest_runner(cluster, owner_dsn, run_id)
                seen.figures["killed_host"] = victim
                dead_pid = kill_runner(cluster, victim)
                killed_at = time.time()
                orphaned = asyncio.run(slots_held(owner_dsn, run_id, dead_pid))
                seen.figures["killed_at_answers"] = now.items_done
                seen.figures["slots_held_by_the_dead_worker"] = orphaned
            elif (
                orphaned
                and "s_until_its_slots_were_taken_over" not in seen.figures
                and asyncio.run(slots_held(owner_dsn, run_id, dead_pid)) == 0
            ):
                seen.figures["s_until_its_slots_were_taken_over"] = time.time() - killed_at
            if now.state in ENDED:
                break
            if time.monotonic() > deadline:
                seen.failures.append(f"the run did not end within {RUN_TIMEOUT_S:.0f} s: {now}")
                break
            time.sleep(0.2)
    if not killed_at:
        seen.failures.append("the run ended before the fault point: nothing was killed")
    return seen, body, killed_at


def figures_of(seen: RunThree, killed_at: float) -> dict[str, Any]:
    """Pace before and after the kill, and how long until answers came again."""
    before = [s for s in seen.samples if s.t <= killed_at]
    after = [s for s in seen.samples if s.t > killed_at]
    figures: dict[str, Any] = {}
    if len(before) >= 2:
        span = before[-1].t - before[0].t
        figures["answers_per_s_before_kill"] = (before[-1].items_done - before[0].items_done) / max(
            span, 1e-9
        )
    if after and before:
        moved = [s for s in after if s.items_done > before[-1].items_done]
        figures["s_from_kill_to_next_answer"] = (moved[0].t - killed_at) if moved else None
        ended = after[-1]
        figures["s_from_kill_to_end"] = ended.t - killed_at
        figures["answers_per_s_after_kill"] = (ended.items_done - before[-1].items_done) / max(
            ended.t - killed_at, 1e-9
        )
    return figures


def check(
    seen: RunThree, body: dict[str, Any], db: DbState, calls: int, sessions: int, items: int
) -> list[str]:
    failures = list(seen.failures)
    total = sessions * items
    if body.get("state") != "finished" or body.get("items_done") != total:
        failures.append(
            f"run: {body.get('state')} at {body.get('items_done')}/{total} items "
            f"(stop reason {body.get('stop_reason')!r}, failures {body.get('failures')})"
        )
    failures += check_stored(db, sessions, items)
    # an item is asked again only where the dead host's call never reached an answer
    if not total <= calls <= total + CONCURRENCY:
        failures.append(f"{calls} model calls for {total} items (at most {CONCURRENCY} again)")
    if not seen.figures.get("slots_held_by_the_dead_worker"):
        failures.append("the dead worker held no session at the kill: nothing was taken over")
    taken = seen.figures.get("s_until_its_slots_were_taken_over")
    if taken is None or taken > RUN_LEASE_S + TAKE_OVER_SLACK_S:
        failures.append(f"its sessions were taken over {taken} s after the kill")
    return failures + check_verdicts(db)


def run_worker_dies(
    cluster: Cluster, owner_dsn: str, evaluator_key: str, sessions: int, items: int,
    fault_at: float, drain_timeout_s: float,
) -> tuple[list[str], dict[str, Any]]:  # fmt: skip
    """Run 3; its failed checks and its figures."""
    seen, body, killed_at = drive(cluster, owner_dsn, evaluator_key, sessions, items, fault_at)
    seen.figures.update(figures_of(seen, killed_at))
    figures = seen.figures
    model_id = body.get("model_id")
    if model_id is None:
        return [*seen.failures, "the run was never read"], figures
    started = time.monotonic()
    figures["scoring_jobs"] = asyncio.run(scoring_drained(owner_dsn, model_id, drain_timeout_s))
    figures["scoring_drained_s_after_run"] = time.monotonic() - started
    db = asyncio.run(read_state(owner_dsn, model_id))
    calls = model_calls(cluster)
    figures["model_calls"] = calls
    figures["items_asked_again"] = calls - sessions * items
    figures["run_failures_by_kind"] = body.get("failures")
    return check(seen, body, db, calls, sessions, items), figures
