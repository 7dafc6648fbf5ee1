"""The services of the multi-host run, each started inside its host's namespace.

:class:`Cluster` owns the work directory and every process it starts (each with its own log
file there); :meth:`Cluster.close` stops them all, and the namespaces' own cleanup
(:func:`tests.multihost.topology.remove_leftovers`) kills whatever is left.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.multihost.topology import SUBNET, Host
from tests.support.services import find_postgres_bindir, find_redis_server

REPO = Path(__file__).resolve().parents[2]
JUDGE = "judge-mh"
"""The one configured judge (the fake LLM's ``judge`` profile on the worker host)."""
MODEL_PROFILE = "model-mid"
"""The fake model under test on the client host."""
API_PORT = 8000
LLM_PORT = 8090
RUN_LLM_PORT = 8091
"""The fake model the server's runs call (run 3), on the client host beside the runner's."""
RUN_LEASE_S = 5.0
"""A dead run worker's sessions are free for another after this."""
RUN_SLOTS_PER_WORKER = 20
"""Sessions one run worker drives at once: room for all of run 3's (its endpoint allows 10
at once), so the survivor can take over everything the dead worker held."""
PG_PORT = 5432
REDIS_PORT = 6379

DEAD_CLIENT_SETTINGS = {
    # A host that dies with its link leaves its backends' transactions open (no FIN ever
    # arrives), holding the row and advisory locks of the sessions it was serving: end them.
    "idle_in_transaction_session_timeout": "'5s'",
    "tcp_keepalives_idle": "5",
    "tcp_keepalives_interval": "2",
    "tcp_keepalives_count": "3",
    # ... and a backend blocked sending to it (a session's sample, say) gives up too
    "tcp_user_timeout": "5000",
}
"""postgresql.conf lines that free what a vanished API host held (see the README)."""

HOSTS: dict[str, Host] = {
    host.name: host
    for host in (
        Host("pg", f"{SUBNET}.10"),
        Host("redis", f"{SUBNET}.11"),
        Host("api1", f"{SUBNET}.21"),
        Host("api2", f"{SUBNET}.22"),
        # the worker host also holds the addresses the rate-limit probes come from
        Host("worker", f"{SUBNET}.30", extra=(f"{SUBNET}.31", f"{SUBNET}.32")),
        Host("proxy", f"{SUBNET}.40"),
        Host("client", f"{SUBNET}.50"),
        # the hosts of ``proctor run-worker`` (run 3 kills runner1)
        Host("runner1", f"{SUBNET}.61"),
        Host("runner2", f"{SUBNET}.62"),
    )
}
API_HOSTS = ("api1", "api2")
WORKERS = ("worker-a", "worker-b")
"""Two ``proctor judge worker`` processes on the worker host; the run kills ``worker-a``."""


def pg_url(role: str, driver: str = "asyncpg") -> str:
    scheme = f"postgresql+{driver}" if driver else "postgresql"
    return f"{scheme}://{role}:{role}@{HOSTS['pg'].address}:{PG_PORT}/proctor"


@dataclass
class Cluster:
    """Work directory, shared settings and the running processes of one multi-host run."""

    workdir: Path
    pg_timeouts: bool = True
    """Let PostgreSQL end the transactions of a host that vanished (see ``start_postgres``)."""
    redis_timeouts: bool = True
    """Keep the server's short Redis timeout (``PROCTOR_REDIS_TIMEOUT_S``, 0.5 s by default);
    ``False`` sets it to 60 s, so a partitioned Redis hangs every rate-limited request."""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    jwt_secret: str = field(default_factory=lambda: secrets.token_urlsafe(48))
    bank_key: str = field(default_factory=lambda: "k1:" + base64.b64encode(os.urandom(32)).decode())

    @property
    def proxy_url(self) -> str:
        return f"http://{HOSTS['proxy'].address}"

    def log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    def env(self, data_dir: str) -> dict[str, str]:
        """The environment of every Proctor process (same secrets and keys on every host)."""
        judge = {
            "name": JUDGE,
            "base_url": f"http://{HOSTS['worker'].address}:{LLM_PORT}/v1",
            "model": "judge",
        }
        settings = {
            "DATABASE_URL": pg_url("proctor_app"),
            "MIGRATION_DATABASE_URL": "",
            "REDIS_URL": f"redis://{HOSTS['redis'].address}:{REDIS_PORT}/0",
            "REDIS_TIMEOUT_S": "0.5" if self.redis_timeouts else "60",
            "JWT_SECRET": self.jwt_secret,
            "BANK_KEYS": self.bank_key,
            "JUDGES": json.dumps([judge]),
            "SCORING_IN_PROCESS": "false",
            "SCORING_POLL_S": "1",
            # a killed worker's claimed jobs come back after this (the fake judge is instant)
            "SCORING_LEASE_S": "10",
            "MAX_CONCURRENT_SESSIONS": "200",
            "MAX_SESSIONS_PER_PERIOD": "1000",
            # the sessions share one key; the probes exercise the per-address limit instead
            "RATE_LIMIT_PER_MINUTE": "1000000",
            "RATE_LIMIT_ORG_PER_MINUTE": "1000000",
            "AUTH_FAILURES_PER_MINUTE": "20",
            "TRUSTED_PROXIES": HOSTS["proxy"].address,
            # runs (run 3): workers answer through the proxy and may call the client host's
            # fake model (a private address, refused unless allowed); a dead worker's
            # sessions are taken over after the lease
            "RUN_API_URL": self.proxy_url,
            "EGRESS_ALLOW": json.dumps([HOSTS["client"].address]),
            "RUN_LEASE_S": str(RUN_LEASE_S),
            "RUN_SLOTS_PER_WORKER": str(RUN_SLOTS_PER_WORKER),
            "RUN_POLL_S": "1",
            "DATA_DIR": str(self.workdir / data_dir),
        }
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PROCTOR_", "PG"))}
        return {**base, **{f"PROCTOR_{k}": v for k, v in settings.items()}, "LC_ALL": "C.UTF-8"}

    # ------------------------------------------------------------------ processes

    def start(self, name: str, host: Host, cmd: list[str], env: dict[str, str]) -> None:
        """Start ``cmd`` inside ``host``'s namespace as process ``name`` (log: ``name.log``)."""
        with self.log(name).open("ab") as log:
            self.processes[name] = subprocess.Popen(
                host.exec(*cmd),
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self, name: str) -> None:
        """SIGKILL process ``name`` and reap it."""
        proc = self.processes.pop(name)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(timeout=10)

    def close(self) -> None:
        """Stop every process started here and PostgreSQL."""
        for proc in self.processes.values():
            with contextlib.suppress(ProcessLookupError, OSError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        self.processes.clear()
        pgdata = self.workdir / "pg" / "data"
        if (pgdata / "postmaster.pid").exists():
            bindir = find_postgres_bindir()
            if bindir is not None:
                cmd = [str(bindir / "pg_ctl"), "stop", "-D", str(pgdata), "-m", "immediate"]
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    subprocess.run(_as_postgres(cmd), capture_output=True, timeout=20, check=False)

    def check_alive(self) -> list[str]:
        """Names of processes started here that have exited."""
        return [name for name, proc in self.processes.items() if proc.poll() is not None]

    # ------------------------------------------------------------------ services

    def start_postgres(self) -> None:
        """initdb (as the ``postgres`` user) and start PostgreSQL on the pg host, durable
        commits on, trusting the subnet."""
        bindir = find_postgres_bindir()
        if bindir is None:
            raise RuntimeError("PostgreSQL binaries not found (apt-get install postgresql)")
        account = pwd.getpwnam("postgres")
        pgdir = self.workdir / "pg"
        pgdir.mkdir()
        os.chown(pgdir, account.pw_uid, account.pw_gid)
        data = pgdir / "data"
        initdb = [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"]
        initdb += ["--encoding=UTF8", "--locale=C", "--no-sync"]
        _run(_as_postgres(initdb), "initdb", cwd=pgdir)
        settings = {
            "listen_addresses": f"'{HOSTS['pg'].address}'",
            "port": str(PG_PORT),
            "unix_socket_directories": f"'{pgdir}'",
            "fsync": "on",
            "synchronous_commit": "on",
            "max_connections": "300",
            "shared_buffers": "64MB",
            "timezone": "'UTC'",
        }
        if self.pg_timeouts:
            settings |= DEAD_CLIENT_SETTINGS
        with (data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("".join(f"{k} = {v}\n" for k, v in settings.items()))
        with (data / "pg_hba.conf").open("a", encoding="utf-8") as hba:
            hba.write(f"host all all {SUBNET}.0/24 trust\n")
        start = [
            str(bindir / "pg_ctl"),
            "start",
            "-D",
            str(data),
            "-l",
            str(pgdir / "postgres.log"),
        ]
        _run(HOSTS["pg"].exec(*_as_postgres([*start, "-w", "-t", "30"])), "pg_ctl start", pgdir)

    def start_redis(self) -> None:
        binary = find_redis_server()
        if binary is None:
            raise RuntimeError("redis-server not found (apt-get install redis-server)")
        redis = HOSTS["redis"]
        cmd = [str(binary), "--bind", redis.address, "--port", str(REDIS_PORT), "--save", ""]
        cmd += ["--appendonly", "no", "--protected-mode", "no", "--dir", str(self.workdir)]
        self.start("redis", redis, cmd, dict(os.environ))

    def start_fake_llm(
        self, name: str, host: Host, address: str, port: int = LLM_PORT, latency_ms: float = 0
    ) -> None:
        """The fake OpenAI-compatible server, answering from the generated bank's file (the
        canonical JSONL is also an answer key; the database holds the answers sealed)."""
        cmd = [sys.executable, "-m", "fakellm", "serve", "--host", address, "--port"]
        cmd += [str(port), "--answer-key", str(self.workdir / "bank.jsonl")]
        cmd += ["--latency-ms", str(latency_ms)]
        self.start(name, host, cmd, self.env("data-llm"))

    def start_api(self, name: str) -> None:
        host = HOSTS[name]
        cmd = [sys.executable, "-m", "server", "serve", "--host", host.address]
        cmd += ["--port", str(API_PORT), "--workers", "1"]
        self.start(name, host, cmd, self.env(f"data-{name}"))

    def start_worker(self, name: str) -> None:
        cmd = [sys.executable, "-m", "server", "judge", "worker"]
        self.start(name, HOSTS["worker"], cmd, self.env(f"data-{name}"))

    def start_run_worker(self, host_name: str) -> None:
        """``proctor run-worker`` on host ``host_name`` (process name ``run-<host>``)."""
        cmd = [sys.executable, "-m", "server", "run-worker"]
        self.start(f"run-{host_name}", HOSTS[host_name], cmd, self.env(f"data-run-{host_name}"))

    def start_proxy(self) -> None:
        prefix = self.workdir / "nginx"
        prefix.mkdir()
        template = (Path(__file__).with_name("nginx.conf.template")).read_text(encoding="utf-8")
        fields = {
            "@PREFIX@": str(prefix),
            "@API1@": HOSTS["api1"].address,
            "@API2@": HOSTS["api2"].address,
            "@LISTEN@": HOSTS["proxy"].address,
        }
        for placeholder, value in fields.items():
            template = template.replace(placeholder, value)
        conf = prefix / "nginx.conf"
        conf.write_text(template, encoding="utf-8")
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.start("proxy", HOSTS["proxy"], [nginx, "-c", str(conf), "-p", str(prefix)], {})

    def proctor(self, *args: str) -> str:
        """Run ``proctor ARGS`` from the root namespace (as the runtime role, migrations as
        the owner); its standard output."""
        env = self.env("data-admin")
        env["PROCTOR_MIGRATION_DATABASE_URL"] = pg_url("proctor_owner")
        cmd = [sys.executable, "-m", "server", *args]
        result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"proctor {' '.join(args)} failed:\n{result.stderr[-3000:]}")
        return result.stdout


def wait_http(url: str, what: str, timeout_s: float = 60.0, ok_below: int = 500) -> None:
    """Wait until ``url`` answers with a status below ``ok_below``."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            status = httpx.get(url, timeout=2).status_code
        except httpx.HTTPError as error:
            last = type(error).__name__
        else:
            if status < ok_below:
                return
            last = f"HTTP {status}"
        time.sleep(0.2)
    raise RuntimeError(f"{what} ({url}) not ready within {timeout_s:.0f} s: {last}")


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd]


def _run(cmd: list[str], what: str, cwd: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed: {(result.stdout + result.stderr)[-3000:]}")
