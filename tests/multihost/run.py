"""Several hosts on one machine: Proctor across network namespaces, with faults.

Run as root (``.ci/run`` runs it after pytest)::

    cd /work/main && . .venv/bin/activate
    python -m tests.multihost.run [--sessions 40] [--items 30] [--json figures.json] [--keep]

Topology and checks: tests/multihost/README.md. In short: PostgreSQL, Redis, two API hosts
behind an nginx proxy host, a worker host (two ``proctor judge worker`` processes and the
fake judge) and a client host (the runner and the fake model), each in its own network
namespace on one bridge, and two run-worker hosts. Run 1 kills an API host and a worker
mid-run; run 2 cuts Redis off for ``--partition-s`` seconds; run 3 kills a run-worker host
in the middle of a run the server drives (``tests/multihost/runs.py``). After each run:
every session finished, the acknowledged answers are exactly the stored ones (each once),
every answer has exactly one verdict per judge; the figures are printed. Exit 0 only if
every check passed; 2 if not root.

Everything it creates is named ``ph-*``/``phv-*``/``prbr0`` (removed at the start too, after
a crashed run) or lives in one ``/tmp/proctor-multihost-*`` directory, and is removed on
exit, on an exception, on Ctrl-C and on SIGTERM (``--keep`` keeps the directory's logs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from tests.multihost import topology
from tests.multihost.bank import write_bank
from tests.multihost.checks import (
    ClientLog,
    check_run,
    count_acks,
    create_database,
    fault_figures,
    read_state,
    scoring_drained,
)
from tests.multihost.cluster import (
    API_PORT,
    HOSTS,
    LLM_PORT,
    MODEL_PROFILE,
    PG_PORT,
    REPO,
    Cluster,
    pg_url,
    wait_http,
)
from tests.multihost.runs import run_worker_dies, start_runners

SUPERUSER_DSN = f"postgresql://postgres@{HOSTS['pg'].address}:{PG_PORT}/postgres"
OWNER_DSN = pg_url("proctor_owner", driver="")
BANK_ITEMS = 4000
"""Distinct items: both runs' sessions draw unseen samples (40 × 30 × 2 = 2,400 by default)."""
CLIENT_TIMEOUT_S = 150.0
DRAIN_TIMEOUT_S = 60.0
LIMITER_DOWN_LOG = "rate limit counters unavailable"
WAKE_LOST_LOG = "could not wake the scoring workers"
RUNS = 3
"""A host dies; Redis goes away; a run-worker host dies."""


@dataclass
class RunResult:
    name: str
    failures: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --------------------------------------------------------------------------- set-up


def set_up(cluster: Cluster) -> dict[str, str]:
    """Namespaces, services, schema, bank, organisations; returns the API keys."""
    topology.create(list(HOSTS.values()))
    say("namespaces and bridge up: " + ", ".join(f"{h.name} {h.address}" for h in HOSTS.values()))
    cluster.start_postgres()
    asyncio.run(create_database(SUPERUSER_DSN))
    cluster.start_redis()
    say("PostgreSQL and Redis up; migrating and importing the bank")
    cluster.proctor("db", "upgrade")
    bank = cluster.workdir / "bank.jsonl"
    write_bank(bank, BANK_ITEMS)
    cluster.proctor("bank", "import", "--no-augment", str(bank))
    cluster.proctor("admin", "create-org", "mh-operator", "--operator")
    admin = cluster.proctor("admin", "create-key", "--org", "mh-operator", "--role", "admin")
    cluster.proctor("admin", "create-org", "mh-lab")
    evaluator = cluster.proctor("admin", "create-key", "--org", "mh-lab", "--role", "evaluator")
    cluster.start_fake_llm("judge-llm", HOSTS["worker"], HOSTS["worker"].address)
    cluster.start_fake_llm("model-llm", HOSTS["client"], "0.0.0.0")
    for name in ("api1", "api2"):
        cluster.start_api(name)
    for name in ("worker-a", "worker-b"):
        cluster.start_worker(name)
    cluster.start_proxy()
    wait_http(f"http://{HOSTS['worker'].address}:{LLM_PORT}/v1/models", "the fake judge")
    wait_http(f"http://{HOSTS['client'].address}:{LLM_PORT}/v1/models", "the fake model")
    for name in ("api1", "api2"):
        wait_http(f"http://{HOSTS[name].address}:{API_PORT}/v1/whoami", f"API host {name}")
    wait_http(f"{cluster.proxy_url}/v1/whoami", "the proxy")
    dead = cluster.check_alive()
    if dead:
        raise RuntimeError(f"exited during start-up: {dead} (logs in {cluster.workdir})")
    say(f"cluster ready: proxy {cluster.proxy_url}")
    return {
        "admin": admin.strip().splitlines()[-1],
        "evaluator": evaluator.strip().splitlines()[-1],
    }


# --------------------------------------------------------------------------- runs


def start_client(cluster: Cluster, name: str, key: str, args: argparse.Namespace) -> Path:
    log = cluster.workdir / f"{name}-events.jsonl"
    cmd = [sys.executable, "-m", "tests.multihost.client", "--server", cluster.proxy_url]
    cmd += ["--key", key, "--sessions", str(args.sessions), "--items", str(args.items)]
    cmd += ["--endpoint", f"http://127.0.0.1:{LLM_PORT}/v1", "--model", MODEL_PROFILE]
    cmd += ["--name", f"multihost-{name}", "--log", str(log)]
    cmd += ["--transcript", str(cluster.workdir / f"{name}-transcript.jsonl")]
    cluster.start(f"client-{name}", HOSTS["client"], cmd, cluster.env("data-client"))
    return log


def wait_for_acks(cluster: Cluster, name: str, log: Path, target: int, sessions: int) -> None:
    """Block until the client has ``target`` acknowledged answers in ``sessions`` sessions
    (every session open: the fault hits a run in its stride, not its opening)."""
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while (got := count_acks(log))[0] < target or got[1] < sessions:
        if cluster.processes[f"client-{name}"].poll() is not None:
            raise RuntimeError(f"the client of {name} exited early (see {log})")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: {target} answers not reached in {CLIENT_TIMEOUT_S:.0f} s")
        time.sleep(0.05)


def finish_run(cluster: Cluster, name: str, log_path: Path, args: argparse.Namespace) -> RunResult:
    """Wait for the client and the scoring, then check the database against the client."""
    result = RunResult(name)
    client = cluster.processes.pop(f"client-{name}")
    try:
        client.wait(timeout=CLIENT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        client.kill()
        result.failures.append(f"the client did not finish within {CLIENT_TIMEOUT_S:.0f} s")
    log = ClientLog.read(log_path)
    if log.model_id is None:
        result.failures.append("the client never registered its model")
        return result
    started = time.monotonic()
    jobs = asyncio.run(scoring_drained(OWNER_DSN, log.model_id, DRAIN_TIMEOUT_S))
    result.figures["scoring_drained_s_after_client"] = time.monotonic() - started
    result.figures["scoring_jobs"] = jobs
    db = asyncio.run(read_state(OWNER_DSN, log.model_id))
    result.failures += check_run(log, db, args.sessions, args.items)
    result.figures["verdicts"] = len(db.verdicts)
    return result


def run_kill(cluster: Cluster, keys: dict[str, str], args: argparse.Namespace) -> RunResult:
    """Run 1: kill API host api1 (every process, link down) and worker-a mid-run."""
    total = args.sessions * args.items
    say(
        f"run 1: {args.sessions} sessions × {args.items} items; kill api1 and worker-a at "
        f"{args.fault_at:.0%}"
    )
    log = start_client(cluster, "run1", keys["evaluator"], args)
    wait_for_acks(cluster, "run1", log, math.ceil(args.fault_at * total), args.sessions)
    fault_at = time.time()
    # link first, as when a machine dies: no FIN or RST leaves it, so the proxy's and
    # PostgreSQL's connections to it are left hanging, not closed
    topology.set_link(HOSTS["api1"], up=False)
    killed = topology.kill_namespace(HOSTS["api1"].netns)
    cluster.kill("worker-a")
    cluster.processes.pop("api1").wait(timeout=10)
    say(f"api1 cut off and killed (pids {killed}), worker-a killed at {count_acks(log)[0]} answers")
    result = finish_run(cluster, "run1", log, args)
    if (client_log := ClientLog.read(log)).acks:
        result.figures.update(fault_figures(client_log, fault_at, None))
    dead = [name for name in cluster.check_alive() if not name.startswith("client")]
    if dead:
        result.failures.append(f"surviving processes exited: {dead}")
    return result


def probe(cluster: Cluster, source: str, until: float | None = None) -> subprocess.Popen[str]:
    cmd = HOSTS["worker"].exec(
        sys.executable,
        "-m",
        "tests.multihost.probe",
        "--server",
        cluster.proxy_url,
        "--source",
        source,
        "--count",
        "30",
    )
    if until is not None:
        cmd += ["--until", str(until)]
    return subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, text=True, start_new_session=True
    )


def probe_result(proc: subprocess.Popen[str], timeout_s: float) -> dict[str, Any]:
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"error": f"no answer within {timeout_s:.0f} s"}
    try:
        parsed: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": f"exit {proc.returncode}, output {out[-300:]!r}"}
    return parsed


def log_lines(cluster: Cluster, names: list[str], needle: str) -> int:
    total = 0
    for name in names:
        path = cluster.log(name)
        if path.exists():
            total += path.read_text(encoding="utf-8", errors="replace").count(needle)
    return total


def run_partition(cluster: Cluster, keys: dict[str, str], args: argparse.Namespace) -> RunResult:
    """Run 2: both API hosts back; Redis cut off for ``--partition-s`` mid-run."""
    topology.set_link(HOSTS["api1"], up=True)
    cluster.start_api("api1")
    cluster.start_worker("worker-a")
    wait_http(f"http://{HOSTS['api1'].address}:{API_PORT}/v1/whoami", "API host api1 (again)")
    apis = ["api1", "api2"]
    before_logs = log_lines(cluster, apis, LIMITER_DOWN_LOG)
    calm = probe_result(probe(cluster, HOSTS["worker"].extra[0]), 60)
    total = args.sessions * args.items
    say(
        f"run 2: {args.sessions} sessions × {args.items} items; Redis cut off for "
        f"{args.partition_s:.0f} s at {args.fault_at:.0%}"
    )
    log = start_client(cluster, "run2", keys["evaluator"], args)
    wait_for_acks(cluster, "run2", log, math.ceil(args.fault_at * total), args.sessions)
    fault_at = time.time()
    topology.set_link(HOSTS["redis"], up=False)
    say(f"Redis link down at {count_acks(log)[0]} answers")
    time.sleep(1.0)  # let the first requests meet the partition
    # the probe's answers count only while Redis is away
    during_probe = probe(cluster, HOSTS["worker"].extra[1], until=fault_at + args.partition_s)
    time.sleep(max(0.0, fault_at + args.partition_s - time.time()))
    topology.set_link(HOSTS["redis"], up=True)
    fault_end = time.time()
    say(f"Redis link up again at {count_acks(log)[0]} answers")
    during = probe_result(during_probe, 60)
    result = finish_run(cluster, "run2", log, args)
    if (client_log := ClientLog.read(log)).acks:
        result.figures.update(fault_figures(client_log, fault_at, fault_end))
    result.figures["probe_redis_up"] = calm
    result.figures["probe_redis_cut_off"] = during
    result.figures["api_log_limiter_unavailable"] = (
        log_lines(cluster, apis, LIMITER_DOWN_LOG) - before_logs
    )
    result.figures["api_log_wake_lost"] = log_lines(cluster, apis, WAKE_LOST_LOG)
    if "429" not in calm.get("statuses", {}):
        result.failures.append(f"rate limit not enforced with Redis up: probe {calm}")
    statuses = during.get("statuses", {})
    # no answer at all within the partition proves nothing either way (the log check does)
    if "error" in during or (statuses and set(statuses) != {"401"}):
        result.failures.append(
            f"with Redis cut off the limiter should let every request through (each 401): {during}"
        )
    if not result.figures["api_log_limiter_unavailable"]:
        result.failures.append(f"no '{LIMITER_DOWN_LOG}' in the API logs during the partition")
    dead = [name for name in cluster.check_alive() if not name.startswith("client")]
    if dead:
        result.failures.append(f"processes exited: {dead}")
    return result


def run_runner_dies(cluster: Cluster, keys: dict[str, str], args: argparse.Namespace) -> RunResult:
    """Run 3: a run the server drives on two run-worker hosts; the busier one dies mid-run."""
    start_runners(cluster)
    say(
        f"run 3: a server run of {args.run_sessions} sessions × {args.items} items on two "
        f"run-worker hosts; kill the busier one at {args.fault_at:.0%}"
    )
    failures, figures = run_worker_dies(
        cluster,
        OWNER_DSN,
        keys["evaluator"],
        sessions=args.run_sessions,
        items=args.items,
        fault_at=args.fault_at,
        drain_timeout_s=DRAIN_TIMEOUT_S,
    )
    result = RunResult("run3", failures, figures)
    dead = [name for name in cluster.check_alive() if not name.startswith("client")]
    if dead:
        result.failures.append(f"surviving processes exited: {dead}")
    return result


# --------------------------------------------------------------------------- report


def show(result: RunResult) -> None:
    print(f"\n=== {result.name} ===")
    for key, value in result.figures.items():
        if isinstance(value, float):
            value = f"{value:.2f}"
        print(f"  {key:42} {value}")
    for failure in result.failures:
        print(f"  FAILED: {failure}")
    if not result.failures:
        print("  all checks passed")


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--items", type=int, default=30, help="items per session")
    parser.add_argument("--fault-at", type=float, default=0.3, help="share of answers in")
    parser.add_argument("--partition-s", type=float, default=20.0)
    parser.add_argument(
        "--run-sessions", type=int, default=20, help="sessions of run 3's server run"
    )
    parser.add_argument(
        "--no-redis-timeouts",
        action="store_true",
        help="PROCTOR_REDIS_TIMEOUT_S=60 (the API then hangs on a partitioned Redis "
        "instead of failing open: run 2 fails)",
    )
    parser.add_argument(
        "--no-pg-timeouts",
        action="store_true",
        help="leave the dead-client settings out of postgresql.conf (the sessions a vanished "
        "host was serving then stay locked: run 1 fails)",
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print(
            "tests/multihost/run.py must run as root (it creates network namespaces, a "
            "bridge and veth links with `ip`); refusing.",
            file=sys.stderr,
        )
        return 2
    missing = [tool for tool in ("ip", "nginx", "runuser") if shutil.which(tool) is None]
    if missing:
        print(
            f"missing tools: {missing} (apt-get install iproute2 nginx util-linux)", file=sys.stderr
        )
        return 2
    # SIGINT too: a background job of a script starts with it ignored, and `timeout
    # --signal=INT` must still get the clean-up
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    started = time.monotonic()
    if removed := topology.remove_leftovers():
        say(f"removed leftovers of an earlier run: {removed}")
    workdir = Path(tempfile.mkdtemp(prefix="proctor-multihost-", dir="/tmp"))
    workdir.chmod(0o755)
    cluster = Cluster(
        workdir, pg_timeouts=not args.no_pg_timeouts, redis_timeouts=not args.no_redis_timeouts
    )
    results: list[RunResult] = []
    try:
        keys = set_up(cluster)
        results.append(run_kill(cluster, keys, args))
        show(results[-1])
        results.append(run_partition(cluster, keys, args))
        show(results[-1])
        results.append(run_runner_dies(cluster, keys, args))
        show(results[-1])
    except Exception as error:  # a broken set-up is a failed run, with the logs named
        results.append(RunResult("set-up", [f"{type(error).__name__}: {error}"]))
        show(results[-1])
    except (KeyboardInterrupt, SystemExit) as stop:  # Ctrl-C, SIGTERM, SIGHUP
        results.append(RunResult("interrupted", [f"stopped ({type(stop).__name__})"]))
        show(results[-1])
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # a second signal must not stop the clean-up
        cluster.close()
        topology.remove_leftovers()
        if args.keep:
            say(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.monotonic() - started
    if args.json:
        args.json.write_text(
            json.dumps(
                {r.name: {"figures": r.figures, "failures": r.failures} for r in results},
                indent=2,
                default=str,
            ),
            encoding="utf-8",
        )
    failed = [f"{r.name}: {f}" for r in results for f in r.failures]
    verdict = "PASS" if not failed and len(results) == RUNS else "FAIL"
    print(f"\nMULTIHOST RESULT: {verdict} ({len(failed)} failed checks) in {elapsed:.0f} s")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
