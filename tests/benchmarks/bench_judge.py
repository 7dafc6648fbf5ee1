"""Benchmark: the LLM judge's throughput against a rate-limiting provider, client and pipeline.

Run (not collected by pytest)::

    cd /work/main && . .venv/bin/activate
    python tests/benchmarks/bench_judge.py [--n 1000] [--latency-ms 200] [--concurrency 32]
        [--error-rate 0.2] [--retry-after 0.5] [--profile] [--no-pipeline]

The issue's target: judge 1,000 answers through ``clients.llm.chat.ChatClient`` against
``proctor fake-llm serve`` with 200 ms latency, concurrency 32 and 20 % HTTP 429s carrying a
Retry-After; the wall time must be within 0.9 of the ideal bound, with zero lost or
duplicated scores.

The fake provider runs as a *subprocess* (``proctor fake-llm serve``), so its CPU is not
counted as the client's, on a free port with ``--latency-ms``, ``--error-rate`` and
``--retry-after`` (it sends ``Retry-After: ceil(s)`` and ``retry-after-ms``; the client
honours the latter). Its ``GET /stats`` counts the HTTP calls actually made, by status.

Phases:

1. ``client`` -- ``--n`` distinct open-ended ``JudgeInput`` s (half correct, half wrong with
   respect to their reference: the fake judge rates them 3 and 0) graded concurrently
   (``asyncio.gather``) by one ``LlmJudge`` (fresh in-memory cache) over one
   ``ChatClient(concurrency=C)`` whose ``RetryPolicy.max_wait_s`` is large enough never to
   defer. Figures:

   * ``ideal bound = N x latency / C``: every answer needs one successful call of
     ``latency``, at most ``C`` in flight (429s are answered at once, without latency);
     ``ratio = bound / wall`` (target >= 0.9);
   * ``tail bound``: what a *zero-overhead* client can achieve. Near the end the ready
     work runs out: about ``error_rate`` of the last wave's calls are refused and wait
     ``retry_after`` (then ``latency``), some of those are refused again, and so on, with
     slots idle meanwhile. ``simulate_makespan`` is a discrete-event model of that (slots,
     429 instant, Retry-After slept outside the slot); the makespan is the same for every
     work-conserving order of the queue, so no client beats it without knowing the dice.
     Reported: the mean over 200 dice seeds (with p10/p90), and the "same-dice bound", the
     makespan on the exact sequence of draws the fake server will make (its ``--seed``,
     skipping draws already made: it decides 429s by ``random.Random(seed)`` in arrival
     order). ``ratio vs same-dice`` is the client's own efficiency; at N=1000 the tail
     alone caps the expected ``bound / wall`` near 0.85 (printed as "best expected");
   * the mean wall time of a successful exchange (``ChatStats.latency_s / calls``): its
     excess over ``latency`` is the per-call overhead (event loop, network, server) that
     stretches every slot;
   * HTTP calls (from the server, total and by status; cross-checked with the client's
     ``stats``), calls per answer (expected ``1 / (1 - error_rate)``);
   * client CPU per HTTP call (``time.process_time`` of this process over the phase / the
     calls; target <= 1 ms);
   * lost (answers without a rating), wrong (rating != expected), duplicated (successful
     calls beyond one per answer), then a second grading of the same inputs, which must
     make 0 calls (cache).

2. ``profile`` (``--profile``): a second fake provider with no latency and no errors;
   ``--profile-n`` answers graded once plain (CPU per call at latency 0) and once under
   ``cProfile``: top 15 by cumulative and by own time, own time grouped by package
   (httpcore, httpx, anyio, h11, C builtins, Proctor's code), and the cost of httpcore's
   failed ``import sniffio`` on every lock/event setup when sniffio is not installed.

3. ``pipeline`` (default on when PostgreSQL binaries are found; ``--no-pipeline``): a
   throwaway PostgreSQL (``tests.support.services``), a migrated database, a bank of short-answer
   items only (open items: the cascade sends every one to the judge), an organisation
   with keys and a registered model (as ``tests.support.api.seed_world``), the API in
   process with ``judge_concurrency=C``; an ``--n``-item session is answered through the
   API (``drive_session``; half right, half wrong), then ``ScoringWorker.drain`` is
   timed, with the worker's engine sized as ``proctor judge worker`` sizes it. Deferred
   jobs are counted and drained again (after their ``not_before``) until every job is
   done. Figures: wall, ratios to the bounds, verdicts and distinct verdict keys (both must
   be N), jobs not done (must be 0), wrong scores, calls per answer, worker CPU (which
   includes the database work of every verdict: cache lookup, cache insert, verdict).

``--max-attempts`` (default 10) is the client phase's ``RetryPolicy.max_attempts``: with
the production default, 6, each answer is lost to six 429s in a row with probability
0.2**6 (about 6 % per run of 1,000). The pipeline phase uses the production policy; a job
whose retries run out is deferred by the worker and drained again.

The machine's cores are shared by this process, the fake provider, PostgreSQL and anything
else running: the load average is printed at the start; CPU figures are noisy under load.

The summary at the end repeats the figures. The exit status is 1 if anything was lost,
duplicated or scored wrong, or a job was left undone -- *not* for missing the 0.9 target.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import heapq
import importlib.util
import io
import math
import os
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root


from clients.llm.chat import ChatClient, ChatEndpoint, RetryPolicy
from judge.llm_judge import LlmJudge, MemoryJudgeCache
from judge.prompts import JudgeInput
from tests.support.bank_keys import install_test_keyring
from tests.support.cpu_time import cores_busy, machine_busy
from tests.support.fake_llm import FakeLlmProcess, start_fake_llm_process

TARGET_RATIO = 0.9
TARGET_CPU_MS = 1.0
JUDGE_MODEL = "judge"
JUDGE_NAME = "judge-v1"


# --------------------------------------------------------------------------- #
# The fake provider, as a subprocess
# --------------------------------------------------------------------------- #


def start_fake_llm(
    *, latency_ms: float, error_rate: float, retry_after: float, seed: int, workdir: Path
) -> FakeLlmProcess:
    """``proctor fake-llm serve`` on a free port; returns once ``/stats`` answers.

    If ``proctor`` itself does not start (its CLI imports the whole server), falls back to
    ``python -m fakellm serve``, the same command without the rest of the CLI, and says so.
    """
    proctor = shutil.which("proctor") or str(Path(sys.executable).with_name("proctor"))
    options = ["--latency-ms", str(latency_ms), "--error-rate", str(error_rate)]
    options += ["--retry-after", str(retry_after), "--seed", str(seed)]
    try:
        return start_fake_llm_process([proctor, "fake-llm", "serve", *options], workdir)
    except RuntimeError as error:
        tail = str(error).strip().splitlines()[-1]
        print(f"  ! 'proctor fake-llm serve' failed ({tail}); using 'python -m fakellm serve'")
        return start_fake_llm_process([sys.executable, "-m", "fakellm", "serve", *options], workdir)


# --------------------------------------------------------------------------- #
# Inputs, bounds
# --------------------------------------------------------------------------- #


def make_inputs(n: int) -> tuple[list[JudgeInput], list[int]]:
    """``n`` distinct open-ended judge requests, even ones right (3), odd ones wrong (0)."""
    inputs, expected = [], []
    for i in range(n):
        reference = f"The harbour charter of {1000 + i} granted by council {i}"
        question = f"[{i}] Explain which document founded the port of city {i}, and why."
        if i % 2 == 0:
            answer = f"{reference}. It gave the merchants of city {i} the right to trade."
            expected.append(3)
        else:
            answer = f"A royal decree of {3000 - i}, signed by nobody in particular ({i})."
            expected.append(0)
        inputs.append(JudgeInput(question=question, answer=answer, reference=reference))
    return inputs, expected


def ideal_bound_s(n: int, latency_s: float, concurrency: int) -> float:
    """Every answer needs at least one successful call; at most ``concurrency`` in flight."""
    return n * latency_s / concurrency


def simulate_makespan(
    n: int,
    latency_s: float,
    concurrency: int,
    error_rate: float,
    retry_after: float,
    dice: random.Random,
) -> float:
    """Makespan of a zero-overhead client: ``concurrency`` slots; each attempt draws
    ``dice.random() < error_rate`` (as the fake server does, one draw per request in
    arrival order): a refused attempt frees its slot at once and its answer is ready again
    ``retry_after`` later; an accepted one holds its slot ``latency_s``.

    Answers are interchangeable, so the slot timeline -- hence the makespan -- is the same
    for every work-conserving order (fresh answers first, retries first, FIFO): no client
    can beat it on the same dice without knowing the dice in advance.
    """
    slots = [0.0] * concurrency  # when each slot is free
    ready = [(0.0, i) for i in range(n)]  # (when ready, tie-breaker)
    heapq.heapify(ready)
    seq, makespan = n, 0.0
    while ready:
        free_at = heapq.heappop(slots)
        ready_at, _ = heapq.heappop(ready)
        start = max(free_at, ready_at)
        if dice.random() < error_rate:
            heapq.heappush(slots, start)
            heapq.heappush(ready, (start + retry_after, seq))
            seq += 1
        else:
            heapq.heappush(slots, start + latency_s)
            makespan = max(makespan, start + latency_s)
    return makespan


@dataclass(frozen=True)
class TailBound:
    """Zero-overhead makespans: over 200 dice seeds (mean, p10, p90), and on the very dice
    sequence the fake server will draw (its seed, skipping the draws already made)."""

    mean_s: float
    p10_s: float
    p90_s: float
    same_dice_s: float


def tail_bound(
    n: int,
    latency_s: float,
    concurrency: int,
    error_rate: float,
    retry_after: float,
    *,
    server_seed: int,
    draws_made: int,
) -> TailBound:
    def run(dice: random.Random) -> float:
        return simulate_makespan(n, latency_s, concurrency, error_rate, retry_after, dice)

    runs = sorted(run(random.Random(f"bench-{seed}")) for seed in range(200))
    dice = random.Random(server_seed)
    for _ in range(draws_made):
        dice.random()
    return TailBound(
        mean_s=statistics.fmean(runs),
        p10_s=runs[len(runs) // 10],
        p90_s=runs[len(runs) * 9 // 10],
        same_dice_s=run(dice),
    )


# --------------------------------------------------------------------------- #
# Phase 1: the client
# --------------------------------------------------------------------------- #


@dataclass
class ClientResult:
    n: int
    wall_s: float
    cpu_s: float
    server_cpu_s: float
    machine_cores: float
    """Cores the whole machine kept busy on average (this process, the server, others)."""
    http_calls: int
    by_status: dict[str, int]
    max_in_flight: int
    client_attempts: int
    client_retries: int
    client_waited_s: float
    mean_ok_latency_s: float
    """Mean wall time of a successful HTTP exchange, as the client measured it."""
    lost: int
    wrong: int
    duplicated: int
    errors: Counter[str] = field(default_factory=Counter)
    rerun_calls: int = -1
    rerun_cached: int = -1
    rerun_wall_s: float = 0.0
    rerun_bad: int = 0
    """Answers of the re-run without the expected rating."""

    @property
    def calls_per_answer(self) -> float:
        return self.http_calls / self.n if self.n else 0.0

    @property
    def cpu_ms_per_call(self) -> float:
        return 1000 * self.cpu_s / self.http_calls if self.http_calls else float("nan")


def new_judge(base_url: str, concurrency: int, max_attempts: int) -> LlmJudge:
    client = ChatClient(
        ChatEndpoint(base_url=base_url, model=JUDGE_MODEL),
        retry=RetryPolicy(max_attempts=max_attempts, max_wait_s=3600.0),
        concurrency=concurrency,
    )
    return LlmJudge(name=JUDGE_NAME, client=client, cache=MemoryJudgeCache())


async def grade_all(judge: LlmJudge, inputs: list[JudgeInput]) -> list[Any]:
    return await asyncio.gather(*(judge.grade(x) for x in inputs), return_exceptions=True)


def check_outcomes(outcomes: list[Any], expected: list[int]) -> tuple[int, int, Counter[str]]:
    """(lost, wrong, errors by type) of one grading."""
    lost, wrong, errors = 0, 0, Counter[str]()
    for outcome, want in zip(outcomes, expected, strict=True):
        if isinstance(outcome, BaseException):
            lost += 1
            errors[type(outcome).__name__] += 1
        elif outcome.rating is None:
            lost += 1
            errors["needs_review"] += 1
        elif outcome.rating != want:
            wrong += 1
    return lost, wrong, errors


async def run_client_phase(
    provider: FakeLlmProcess,
    inputs: list[JudgeInput],
    expected: list[int],
    *,
    concurrency: int,
    max_attempts: int,
    rerun: bool = True,
) -> ClientResult:
    judge = new_judge(provider.base_url, concurrency, max_attempts)
    try:
        provider.reset()
        server_cpu0, busy0 = provider.cpu_s(), machine_busy()
        cpu0, t0 = time.process_time(), time.perf_counter()
        outcomes = await grade_all(judge, inputs)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        machine = cores_busy(busy0, machine_busy(), wall)
        server_cpu = provider.cpu_s() - server_cpu0
        stats = provider.stats()
        chat = judge.client.stats
        lost, wrong, errors = check_outcomes(outcomes, expected)
        ok = int(stats["by_status"].get("200", 0))
        result = ClientResult(
            n=len(inputs),
            wall_s=wall,
            cpu_s=cpu,
            server_cpu_s=server_cpu,
            machine_cores=machine,
            http_calls=int(stats["requests"]),
            by_status=dict(stats["by_status"]),
            max_in_flight=int(stats["max_in_flight"]),
            client_attempts=chat.attempts,
            client_retries=chat.retries,
            client_waited_s=chat.waited_s,
            mean_ok_latency_s=chat.latency_s / chat.calls if chat.calls else float("nan"),
            lost=lost,
            wrong=wrong,
            # the "judge" profile always answers readably: one 200 per answer, no more
            duplicated=max(0, ok - (len(inputs) - lost)),
            errors=errors,
        )
        if rerun:
            provider.reset()
            t1 = time.perf_counter()
            again = await grade_all(judge, inputs)
            result.rerun_wall_s = time.perf_counter() - t1
            result.rerun_calls = int(provider.stats()["requests"])
            result.rerun_cached = sum(
                1 for o in again if not isinstance(o, BaseException) and o.cached
            )
            lost2, wrong2, _ = check_outcomes(again, expected)
            result.rerun_bad = lost2 + wrong2
        return result
    finally:
        await judge.client.aclose()


def print_bounds(
    n: int, wall_s: float, args: argparse.Namespace, tail: TailBound, mean_ok_latency_s: float
) -> None:
    """Wall time against the ideal bound and the zero-overhead tail bounds."""
    latency_s = args.latency_ms / 1000
    bound = ideal_bound_s(n, latency_s, args.concurrency)
    print(f"  ideal bound          {bound:8.3f} s   (N x latency / C)")
    print(
        f"  ratio                {bound / wall_s:8.3f}     (target >= {TARGET_RATIO}; "
        f"the best a zero-overhead client can expect here is "
        f"{bound / tail.mean_s:.3f}, see the tail bound)"
    )
    print(
        f"  tail bound           {tail.mean_s:8.3f} s   mean zero-overhead makespan over 200 "
        f"dice seeds (p10 {tail.p10_s:.3f}, p90 {tail.p90_s:.3f}; "
        f"ideal + retry-after = {bound + args.retry_after:.3f})"
    )
    print(
        f"  same-dice bound      {tail.same_dice_s:8.3f} s   zero-overhead makespan on the "
        f"fake server's own dice sequence"
    )
    print(
        f"  honest ratios        {tail.mean_s / wall_s:8.3f}     vs tail bound; "
        f"{tail.same_dice_s / wall_s:.3f} vs same-dice bound"
    )
    if math.isfinite(mean_ok_latency_s):
        print(
            f"  per-call overhead    {1000 * (mean_ok_latency_s - latency_s):8.2f} ms  "
            f"(mean successful exchange {1000 * mean_ok_latency_s:.1f} ms vs latency "
            f"{args.latency_ms:g} ms: {100 * (mean_ok_latency_s / latency_s - 1):.1f} % of "
            "every slot, client event loop + network + server)"
            if latency_s > 0
            else f"  mean exchange        {1000 * mean_ok_latency_s:8.2f} ms"
        )


def print_client(result: ClientResult, args: argparse.Namespace, tail: TailBound) -> None:
    expected_cpa = 1 / (1 - args.error_rate) if args.error_rate < 1 else float("inf")
    print(f"  wall                 {result.wall_s:8.3f} s")
    print_bounds(result.n, result.wall_s, args, tail, result.mean_ok_latency_s)
    print(
        f"  HTTP calls           {result.http_calls:8d}     by status {result.by_status}; "
        f"client attempts {result.client_attempts}, retries {result.client_retries}, "
        f"slept {result.client_waited_s:.1f} s in all"
    )
    print(
        f"  calls per answer     {result.calls_per_answer:8.3f}     "
        f"(expected ~{expected_cpa:.3f}); max in flight at the server {result.max_in_flight}"
    )
    print(
        f"  client CPU           {result.cpu_s:8.3f} s   = {result.cpu_ms_per_call:.3f} ms per "
        f"HTTP call (target <= {TARGET_CPU_MS}); "
        f"{1000 * result.cpu_s / result.n:.3f} ms per answer; "
        f"{100 * result.cpu_s / result.wall_s:.0f} % of a core"
    )
    print(
        f"  fake server CPU      {result.server_cpu_s:8.3f} s   "
        f"({100 * result.server_cpu_s / result.wall_s:.0f} % of a core, another process); "
        f"whole machine {result.machine_cores:.2f} of {os.cpu_count()} cores busy"
    )
    errors = f" ({dict(result.errors)})" if result.errors else ""
    print(f"  lost {result.lost}{errors}, wrong {result.wrong}, duplicated {result.duplicated}")
    if result.rerun_calls >= 0:
        print(
            f"  re-run (cache)       {result.rerun_calls} HTTP calls, "
            f"{result.rerun_cached}/{result.n} cached, {result.rerun_wall_s * 1000:.0f} ms, "
            f"{result.rerun_bad} without the expected rating"
        )


# --------------------------------------------------------------------------- #
# Phase 2: the profile
# --------------------------------------------------------------------------- #


def profile_phase(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    provider = start_fake_llm(
        latency_ms=0, error_rate=0, retry_after=args.retry_after, seed=args.seed, workdir=workdir
    )
    try:
        inputs, expected = make_inputs(args.profile_n)
        plain = asyncio.run(
            run_client_phase(
                provider,
                inputs,
                expected,
                concurrency=args.concurrency,
                max_attempts=args.max_attempts,
                rerun=False,
            )
        )
        print(
            f"  latency 0, no errors: {plain.http_calls} calls in {plain.wall_s:.2f} s "
            f"({plain.http_calls / plain.wall_s:.0f} calls/s); client CPU "
            f"{plain.cpu_ms_per_call:.3f} ms per call ({100 * plain.cpu_s / plain.wall_s:.0f} "
            f"% of a core); fake server CPU {100 * plain.server_cpu_s / plain.wall_s:.0f} "
            f"% of a core; lost {plain.lost}, wrong {plain.wrong}"
        )
        profiler = cProfile.Profile()
        profiler.enable()
        profiled = asyncio.run(
            run_client_phase(
                provider,
                inputs,
                expected,
                concurrency=args.concurrency,
                max_attempts=args.max_attempts,
                rerun=False,
            )
        )
        profiler.disable()
        print(
            f"  under cProfile: {profiled.cpu_ms_per_call:.3f} ms CPU per call "
            "(the profiler's own overhead included)"
        )
        for key, title in (("cumulative", "cumulative time"), ("tottime", "own time")):
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out)
            stats.strip_dirs().sort_stats(key).print_stats(15)
            lines = out.getvalue().splitlines()
            start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
            print(f"\n  top 15 by {title}:")
            for line in lines[start:]:
                if line.strip():
                    print("   ", line.rstrip()[:150])
        print(
            "    (a coroutine counts one call per resumption, hence ncalls >> answers; "
            "times include the profiler's overhead)"
        )
        print("\n  own time by package (whole profile):")
        packages = own_time_by_package(profiler, profiled.http_calls)
        for package, ms in packages:
            print(f"    {package:44s} {ms:8.3f} ms per call")
        sniffio = failed_sniffio_imports(profiler, profiled.http_calls)
        if sniffio is not None:
            per_call, cost_us = sniffio
            print(
                f"\n  httpcore's current_async_library() runs 'import sniffio' "
                f"{per_call:.1f} times per call; sniffio is not installed (anyio >= 4.11 "
                f"no longer requires it) and a failed import is not cached: {cost_us:.0f} us "
                f"each, ~{per_call * cost_us / 1000:.2f} ms of CPU per call without the "
                "profiler (installing sniffio removes it; encode/httpcore#1103)"
            )
        return {
            "cpu_ms_per_call_latency0": plain.cpu_ms_per_call,
            "calls_per_s_latency0": plain.http_calls / plain.wall_s,
            "packages": packages,
            "sniffio_ms_per_call": (sniffio[0] * sniffio[1] / 1000) if sniffio else 0.0,
        }
    finally:
        provider.stop()


def failed_sniffio_imports(profiler: cProfile.Profile, calls: int) -> tuple[float, float] | None:
    """(failed ``import sniffio`` per HTTP call, microseconds per failed import), or None
    if sniffio is importable (then httpcore's lookup is a cheap ``sys.modules`` hit)."""
    if importlib.util.find_spec("sniffio") is not None:
        return None
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    lookups = sum(
        row[1]
        for (filename, _line, name), row in stats.items()
        if name == "current_async_library" and "httpcore" in filename
    )

    def attempt() -> None:  # httpcore's ``try: import sniffio / except ImportError``
        try:  # noqa: SIM105
            __import__("sniffio")
        except ImportError:
            pass

    repeat = 2000
    started = time.perf_counter()
    for _ in range(repeat):
        attempt()
    cost_us = 1e6 * (time.perf_counter() - started) / repeat
    return lookups / max(1, calls), cost_us


def own_time_by_package(profiler: cProfile.Profile, calls: int) -> list[tuple[str, float]]:
    """Own (``tottime``) time grouped by where the code lives, in ms per HTTP call."""
    root = str(Path(__file__).resolve().parents[2])
    totals: Counter[str] = Counter()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    for (filename, _line, _name), row in stats.items():
        parts = Path(filename).parts
        if filename == "~":
            where = "C builtins (sockets, json, hashlib, ...)"
        elif "site-packages" in parts:
            where = parts[parts.index("site-packages") + 1].split(".")[0]
        elif filename.startswith(root):
            where = "proctor " + "/".join(parts[len(Path(root).parts) : -1] or ["."])
        elif filename.startswith("<frozen importlib"):
            where = "importlib (failed imports)"
        else:
            where = "stdlib " + Path(filename).stem
        totals[where] += row[2]
    return [(where, 1000 * s / max(1, calls)) for where, s in totals.most_common(12)]


# --------------------------------------------------------------------------- #
# Phase 3: the pipeline (API + outbox + worker on PostgreSQL)
# --------------------------------------------------------------------------- #


@dataclass
class PipelineResult:
    n: int
    wall_s: float
    drains: int
    deferred: int
    deferral_wait_s: float
    recorded: int
    duplicates: int
    verdicts: int
    distinct_verdicts: int
    jobs: dict[str, int]
    not_done: int
    wrong: int
    http_calls: int
    by_status: dict[str, int]
    verdict_calls: int
    drive_s: float
    cpu_s: float
    session_state: str
    mean_ok_latency_s: float
    machine_cores: float

    @property
    def calls_per_answer(self) -> float:
        return self.http_calls / self.n if self.n else 0.0


async def seed_bench_world(db_url: str, n_items: int) -> Any:
    """A short-answer-only bank of at least ``n_items`` families, organisations, keys and
    models (``tests.support.api.seed_world``)."""
    from tests.support.api import seed_world

    disciplines, subdisciplines = 4, 4
    per_cell = math.ceil(n_items * 1.1 / (disciplines * subdisciplines))
    return await seed_world(
        db_url,
        per_cell=per_cell,
        augment=False,
        qtypes=("short_answer",),
        disciplines=disciplines,
        subdisciplines=subdisciplines,
    )


async def job_states(db_url: str, session_id: Any) -> tuple[dict[str, int], Any]:
    """Jobs of the session by state, and the earliest ``not_before`` of a queued one."""
    from sqlalchemy import func, select

    from server.database import create_engine, unit_of_work
    from server.scoring.models import ScoringJob

    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            rows = await db.execute(
                select(ScoringJob.state, func.count())
                .where(ScoringJob.session_id == session_id)
                .group_by(ScoringJob.state)
            )
            states = {state: int(count) for state, count in rows.tuples()}
            due = await db.scalar(
                select(func.min(ScoringJob.not_before)).where(
                    ScoringJob.session_id == session_id, ScoringJob.state == "queued"
                )
            )
        return states, due
    finally:
        await engine.dispose()


async def run_pipeline(
    db_url: str, provider: FakeLlmProcess, args: argparse.Namespace, bounds: Any
) -> tuple[PipelineResult, TailBound]:
    from datetime import UTC, datetime

    from server.database import create_engine
    from server.scoring.worker import ScoringWorker
    from tests.support.api import running_api, test_settings
    from tests.support.sessions import drive_session, table_counts, verdicts

    world = await seed_bench_world(db_url, args.n)
    settings = test_settings(
        db_url,
        judges=[{"name": JUDGE_NAME, "base_url": provider.base_url, "model": JUDGE_MODEL}],
        scoring_in_process=False,
        judge_concurrency=args.concurrency,
        max_session_items=max(5000, args.n),
    )
    t0 = time.perf_counter()
    async with running_api(settings) as (_, client):
        driven = await drive_session(client, db_url, world, n_items=args.n)
    drive_s = time.perf_counter() - t0
    print(f"  session of {len(driven.expected)} answers driven through the API in {drive_s:.1f} s")

    # as ``proctor judge worker`` does (server/scoring/process.py)
    engine = create_engine(db_url, pool_size=10, max_overflow=10, pool_pre_ping=False)
    worker = ScoringWorker(engine=engine, settings=settings)
    drains = deferred = recorded = duplicates = 0
    deferral_wait = 0.0
    try:
        tail = bounds(len(driven.expected), provider)
        provider.reset()
        busy0 = machine_busy()
        cpu0, t0 = time.process_time(), time.perf_counter()
        deadline = t0 + args.pipeline_timeout
        while True:
            stats = await worker.drain()
            drains += 1
            deferred += stats.deferred
            recorded += stats.recorded
            duplicates += stats.duplicates
            states, due = await job_states(db_url, driven.id)
            if set(states) <= {"done"}:
                break
            if time.perf_counter() > deadline:
                print(f"  ! gave up waiting for deferred jobs: {states}")
                break
            wait = 0.05
            if due is not None:
                due = due if due.tzinfo else due.replace(tzinfo=UTC)
                wait = max(0.0, (due - datetime.now(UTC)).total_seconds()) + 0.01
            print(f"  drain {drains}: jobs {states}; next due in {wait:.2f} s")
            deferral_wait += wait
            await asyncio.sleep(wait)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        machine = cores_busy(busy0, machine_busy(), wall)
        server = provider.stats()
        judge = worker.panel.get(JUDGE_NAME)
        chat = judge.client.stats if judge is not None else None
        mean_ok = chat.latency_s / chat.calls if chat is not None and chat.calls else math.nan
    finally:
        await worker.aclose()
        await engine.dispose()

    counts = await table_counts(db_url, driven.id)
    found = {v.position: v for v in await verdicts(db_url, driven.id)}
    wrong = sum(1 for p, want in driven.expected.items() if p in found and found[p].score != want)
    jobs = {k: int(v) for k, v in counts["jobs"].items()}
    result = PipelineResult(
        n=len(driven.expected),
        wall_s=wall,
        drains=drains,
        deferred=deferred,
        deferral_wait_s=deferral_wait,
        recorded=recorded,
        duplicates=duplicates,
        verdicts=int(counts["verdicts"]),
        distinct_verdicts=int(counts["distinct_verdicts"]),
        jobs=jobs,
        not_done=sum(v for k, v in jobs.items() if k != "done"),
        wrong=wrong,
        http_calls=int(server["requests"]),
        by_status=dict(server["by_status"]),
        verdict_calls=sum(v.calls for v in found.values()),
        drive_s=drive_s,
        cpu_s=cpu,
        session_state=str(counts["state"]),
        mean_ok_latency_s=mean_ok,
        machine_cores=machine,
    )
    return result, tail


def pipeline_phase(
    args: argparse.Namespace, provider: FakeLlmProcess, bounds: Any
) -> tuple[PipelineResult, TailBound]:
    from server.database import upgrade
    from tests.support import services

    bindir = services.find_postgres_bindir()
    assert bindir is not None
    with services.postgres_server(bindir) as pg:
        pg.create_database("bench_judge")
        db_url = pg.url("bench_judge")
        upgrade(db_url)
        return asyncio.run(run_pipeline(db_url, provider, args, bounds))


def print_pipeline(result: PipelineResult, args: argparse.Namespace, tail: TailBound) -> None:
    print(
        f"  drain wall           {result.wall_s:8.3f} s   ({result.drains} drain(s), "
        f"{result.deferral_wait_s:.2f} s of it waiting for deferred jobs)"
    )
    print_bounds(result.n, result.wall_s, args, tail, result.mean_ok_latency_s)
    print(
        f"  verdicts             {result.verdicts:8d}     distinct keys "
        f"{result.distinct_verdicts}; recorded {result.recorded}, duplicates "
        f"{result.duplicates}, deferred {result.deferred}"
    )
    print(
        f"  jobs                 {result.jobs}  not done {result.not_done}; session "
        f"{result.session_state}; wrong scores {result.wrong}"
    )
    print(
        f"  HTTP calls           {result.http_calls:8d}     by status {result.by_status}; "
        f"{result.calls_per_answer:.3f} per answer; sum of verdict.calls "
        f"{result.verdict_calls}"
    )
    print(
        f"  worker CPU           {result.cpu_s:8.3f} s   = "
        f"{1000 * result.cpu_s / max(1, result.http_calls):.3f} ms per HTTP call, "
        f"{1000 * result.cpu_s / max(1, result.n):.3f} ms per answer "
        f"({100 * result.cpu_s / result.wall_s:.0f} % of a core; includes the database "
        "driver and the cache/verdict transactions)"
    )
    print(
        f"  whole machine        {result.machine_cores:8.2f}     of {os.cpu_count()} cores busy "
        "(worker, PostgreSQL, fake server and anything else)"
    )


# --------------------------------------------------------------------------- #
# Main
# --------------------------------------------------------------------------- #


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="answers to judge")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--error-rate", type=float, default=0.2, help="fraction of 429s")
    parser.add_argument("--retry-after", type=float, default=0.5, help="seconds, sent by 429s")
    parser.add_argument(
        "--max-attempts",
        type=int,
        default=10,
        help="RetryPolicy.max_attempts of the client phase (the production default, 6, "
        "loses an answer to six 429s in a row with probability 0.2**6 = 6.4e-5 each)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the fake server's seed")
    parser.add_argument("--profile", action="store_true", help="run the cProfile phase")
    parser.add_argument("--profile-n", type=int, default=3000, help="answers in the profile")
    parser.add_argument(
        "--pipeline",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the PostgreSQL pipeline phase (default: if PostgreSQL binaries are found)",
    )
    parser.add_argument("--pipeline-timeout", type=float, default=600.0)
    parser.add_argument("--uvloop", action="store_true", help="use uvloop's event loop")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    install_test_keyring()
    if args.uvloop:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    explicit_pipeline = bool(args.pipeline)
    if args.pipeline is None:
        from tests.support import services

        args.pipeline = services.find_postgres_bindir() is not None
    latency_s = args.latency_ms / 1000
    print(
        f"bench_judge: N={args.n}, latency {args.latency_ms:g} ms, concurrency "
        f"{args.concurrency}, {100 * args.error_rate:g} % 429 with retry-after "
        f"{args.retry_after:g} s; {os.cpu_count()} CPUs; "
        f"{'uvloop' if args.uvloop else 'asyncio'} loop; load average "
        f"{os.getloadavg()[0]:.2f} before start (other processes share the cores)"
    )

    def bounds(n: int, provider: FakeLlmProcess) -> TailBound:
        return tail_bound(
            n,
            latency_s,
            args.concurrency,
            args.error_rate,
            args.retry_after,
            server_seed=args.seed,
            draws_made=provider.draws_made(),
        )

    def verdict(ratio: float) -> str:
        return "met" if ratio >= TARGET_RATIO else "MISSED"

    failures: list[str] = []
    summary: list[str] = []
    workdir = Path(tempfile.mkdtemp(prefix="bench-judge-"))
    provider = start_fake_llm(
        latency_ms=args.latency_ms,
        error_rate=args.error_rate,
        retry_after=args.retry_after,
        seed=args.seed,
        workdir=workdir,
    )
    try:
        print(f"\n[client] fake LLM at {provider.base_url} (pid {provider.proc.pid})")
        inputs, expected = make_inputs(args.n)
        tail = bounds(args.n, provider)
        client = asyncio.run(
            run_client_phase(
                provider,
                inputs,
                expected,
                concurrency=args.concurrency,
                max_attempts=args.max_attempts,
            )
        )
        print_client(client, args, tail)
        bound = ideal_bound_s(args.n, latency_s, args.concurrency)
        ratio = bound / client.wall_s
        summary += [
            f"client   wall {client.wall_s:.3f} s; ideal bound {bound:.3f} s -> ratio "
            f"{ratio:.3f} (target {TARGET_RATIO}: {verdict(ratio)})",
            f"client   tail bound {tail.mean_s:.3f} s -> {tail.mean_s / client.wall_s:.3f}; "
            f"same-dice bound {tail.same_dice_s:.3f} s -> "
            f"{tail.same_dice_s / client.wall_s:.3f}; best expected ratio "
            f"{bound / tail.mean_s:.3f}",
            f"client   HTTP calls {client.http_calls} {client.by_status}, "
            f"{client.calls_per_answer:.3f} per answer; mean exchange "
            f"{1000 * client.mean_ok_latency_s:.1f} ms",
            f"client   CPU {client.cpu_ms_per_call:.3f} ms per HTTP call (target "
            f"{TARGET_CPU_MS}: {'met' if client.cpu_ms_per_call <= TARGET_CPU_MS else 'MISSED'}); "
            f"machine {client.machine_cores:.2f} of {os.cpu_count()} cores busy",
            f"client   lost {client.lost}, wrong {client.wrong}, duplicated "
            f"{client.duplicated}; cached re-run: {client.rerun_calls} calls, "
            f"{client.rerun_cached}/{client.n} cached",
        ]
        if client.lost or client.wrong or client.duplicated:
            failures.append("client: lost, wrong or duplicated scores")
        if client.rerun_calls != 0 or client.rerun_cached != client.n or client.rerun_bad:
            failures.append("client: the cached re-run called the provider")

        if args.profile:
            print(f"\n[profile] {args.profile_n} answers, latency 0, no errors")
            prof = profile_phase(args, workdir)
            summary.append(
                f"profile  CPU {prof['cpu_ms_per_call_latency0']:.3f} ms per HTTP call at "
                f"latency 0 ({prof['calls_per_s_latency0']:.0f} calls/s); failed 'import "
                f"sniffio' in httpcore ~{prof['sniffio_ms_per_call']:.2f} ms of it"
            )
            top = ", ".join(f"{name} {ms:.2f}" for name, ms in prof["packages"][:5])
            ours = sum(ms for name, ms in prof["packages"] if name.startswith("proctor"))
            summary.append(
                f"profile  own time per call (profiled, ms): {top}; Proctor's code {ours:.2f}"
            )

        if args.pipeline:
            try:
                import server.scoring.worker  # noqa: F401
            except ImportError as error:
                print(f"\n[pipeline] skipped: server.scoring.worker does not import: {error}")
                summary.append(f"pipeline skipped ({error})")
                if explicit_pipeline:
                    failures.append("pipeline: not run")
            else:
                print("\n[pipeline] PostgreSQL, API in process, ScoringWorker.drain")
                pipe, ptail = pipeline_phase(args, provider, bounds)
                print_pipeline(pipe, args, ptail)
                pbound = ideal_bound_s(pipe.n, latency_s, args.concurrency)
                pratio = pbound / pipe.wall_s
                summary += [
                    f"pipeline wall {pipe.wall_s:.3f} s; ratio {pratio:.3f} (target "
                    f"{TARGET_RATIO}: {verdict(pratio)}); tail bound {ptail.mean_s:.3f} s -> "
                    f"{ptail.mean_s / pipe.wall_s:.3f}; same-dice {ptail.same_dice_s:.3f} s "
                    f"-> {ptail.same_dice_s / pipe.wall_s:.3f}",
                    f"pipeline {pipe.drains} drain(s), {pipe.deferred} deferred; verdicts "
                    f"{pipe.verdicts}, distinct {pipe.distinct_verdicts}, jobs not done "
                    f"{pipe.not_done}, wrong {pipe.wrong}, duplicates {pipe.duplicates}",
                    f"pipeline HTTP calls {pipe.http_calls} {pipe.by_status}, "
                    f"{pipe.calls_per_answer:.3f} per answer; mean exchange "
                    f"{1000 * pipe.mean_ok_latency_s:.1f} ms",
                    f"pipeline worker CPU {1000 * pipe.cpu_s / max(1, pipe.n):.3f} ms per answer "
                    f"({100 * pipe.cpu_s / pipe.wall_s:.0f} % of a core); machine "
                    f"{pipe.machine_cores:.2f} of {os.cpu_count()} cores busy",
                ]
                if pipe.n != args.n:
                    failures.append(f"pipeline: the session had {pipe.n} answers, not {args.n}")
                if pipe.verdicts != pipe.n or pipe.distinct_verdicts != pipe.n:
                    failures.append("pipeline: lost or duplicated verdicts")
                if pipe.not_done or pipe.wrong:
                    failures.append("pipeline: jobs not done or wrong scores")
                if int(pipe.by_status.get("200", 0)) != pipe.n:
                    failures.append("pipeline: not exactly one paid judge call per answer")
    finally:
        provider.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    print("\n=== summary ===")
    for line in summary:
        print("  " + line)
    if failures:
        print("FAILED: " + "; ".join(failures))
        return 1
    print("OK: nothing lost, duplicated or scored wrong")
    return 0


if __name__ == "__main__":
    sys.exit(main())
