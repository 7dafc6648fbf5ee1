"""Throwaway PostgreSQL and Redis servers for the test-suite.

Plain functions and context managers (no pytest dependency) that start *real*
server processes from the binaries installed on the machine, wait until they
accept connections, and stop and delete everything on exit -- also when the
body raises (including ``KeyboardInterrupt``), with an ``atexit`` hook as a
backup for interpreter shutdown.

Contract:

* ``find_postgres_bindir()`` / ``find_redis_server()`` return ``None`` when the
  binaries are absent; nothing else in this module silently degrades.
* ``postgres_server()`` / ``redis_server()`` raise ``ServiceNotFoundError`` when
  the binaries are absent and ``ServiceStartError`` (with the server log tail)
  when start-up fails or does not finish within ``READY_TIMEOUT`` seconds.
* Servers listen on a free TCP port on 127.0.0.1 only; PostgreSQL uses ``trust``
  authentication and durable commits (the API refuses to start otherwise).
* PostgreSQL refuses to run as root: when the current user is root, ``initdb``
  and ``pg_ctl`` run as the ``postgres`` system user (falling back to
  ``nobody``) via ``runuser`` (or ``setpriv``), in a temp directory owned by it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tests.support.ports import free_port

READY_TIMEOUT = 30.0
"""Seconds to wait for a server to accept connections."""

PG_SUPERUSER = "postgres"
"""Name of the database superuser created by ``initdb``."""

_PG_TOOLS = ("initdb", "pg_ctl", "postgres")
_PG_SETTINGS: Mapping[str, str] = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "on",
    "synchronous_commit": "on",
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "max_connections": "100",
    "shared_buffers": "32MB",
    "timezone": "'UTC'",
    "logging_collector": "off",
}
_DB_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_PORT_IN_USE = "Address already in use"
_START_ATTEMPTS = 3
_RUNUSER_DIRS = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")


class ServiceNotFoundError(RuntimeError):
    """The server binaries are not installed."""


class ServiceStartError(RuntimeError):
    """A server (or one of its tools) failed to start; the message has the log tail."""


# --------------------------------------------------------------------------- #
# Public data types
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class PostgresServer:
    """A running throwaway PostgreSQL server (superuser ``user``, trust auth)."""

    host: str
    port: int
    user: str
    bindir: Path
    socket_dir: Path

    def url(self, dbname: str = "postgres", driver: str = "asyncpg") -> str:
        """SQLAlchemy URL, e.g. ``postgresql+asyncpg://postgres@127.0.0.1:5999/db``."""
        scheme = f"postgresql+{driver}" if driver else "postgresql"
        return f"{scheme}://{self.user}@{self.host}:{self.port}/{dbname}"

    def dsn(self, dbname: str = "postgres") -> str:
        """libpq/asyncpg DSN, e.g. ``postgresql://postgres@127.0.0.1:5999/db``."""
        return self.url(dbname, driver="")

    def create_database(self, name: str) -> None:
        """Create database ``name`` (letters, digits, ``_``; max 63 chars).

        Raises ``ValueError`` for an invalid name and ``ServiceStartError`` if
        ``createdb`` fails (e.g. the database already exists).
        """
        if not _DB_NAME.fullmatch(name):
            raise ValueError(f"invalid database name {name!r}: use [A-Za-z_][A-Za-z0-9_]*")
        createdb = self.bindir / "createdb"
        cmd = [str(createdb), "-h", self.host, "-p", str(self.port), "-U", self.user, name]
        _run_checked(cmd, what=f"createdb {name}", cwd=None, timeout=READY_TIMEOUT)


@dataclass(frozen=True)
class RedisServer:
    """A running throwaway Redis server (no persistence, no auth)."""

    host: str
    port: int

    @property
    def url(self) -> str:
        """Connection URL for database 0, e.g. ``redis://127.0.0.1:6999/0``."""
        return f"redis://{self.host}:{self.port}/0"


# --------------------------------------------------------------------------- #
# Binary discovery
# --------------------------------------------------------------------------- #


def find_postgres_bindir() -> Path | None:
    """Directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or ``None``.

    Search order: ``initdb`` on ``PATH`` (symlinks resolved), ``pg_config
    --bindir``, then ``/usr/lib/postgresql/*/bin`` with the highest version.
    """
    for candidate in _postgres_bindir_candidates():
        if all(_is_executable(candidate / tool) for tool in _PG_TOOLS):
            return candidate
    return None


def find_redis_server() -> Path | None:
    """Path of the ``redis-server`` executable (``PATH``, then /usr/bin), or ``None``."""
    found = shutil.which("redis-server")
    candidates = [Path(found)] if found else []
    candidates += [Path("/usr/bin/redis-server"), Path("/usr/local/bin/redis-server")]
    return next((path for path in candidates if _is_executable(path)), None)


def _postgres_bindir_candidates() -> Iterator[Path]:
    initdb = shutil.which("initdb")
    if initdb:
        yield Path(initdb).resolve().parent
        yield Path(initdb).parent
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            if out:
                yield Path(out)
    versioned = Path("/usr/lib/postgresql").glob("*/bin")
    yield from sorted(versioned, key=lambda p: _version_key(p.parent.name), reverse=True)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else -1 for part in version.split("."))


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


# --------------------------------------------------------------------------- #
# PostgreSQL
# --------------------------------------------------------------------------- #


@contextlib.contextmanager
def postgres_server(
    bindir: Path | None = None,
    settings: Mapping[str, str] | None = None,
    timeout: float = READY_TIMEOUT,
) -> Iterator[PostgresServer]:
    """Run a fresh PostgreSQL cluster (one ``initdb``) for the ``with`` block.

    ``settings`` are extra ``postgresql.conf`` lines (``name -> raw value``,
    quote strings yourself) that override the fast test defaults.
    """
    bindir = bindir or find_postgres_bindir()
    if bindir is None or not all(_is_executable(bindir / t) for t in _PG_TOOLS):
        raise ServiceNotFoundError(
            f"PostgreSQL binaries ({', '.join(_PG_TOOLS)}) not found "
            f"(looked in {bindir or 'PATH, pg_config --bindir, /usr/lib/postgresql/*/bin'})"
        )
    account = _service_account()
    workdir = _make_workdir("proctor-pg-", account)
    datadir = workdir / "data"
    with _Teardown(lambda: _stop_postgres(bindir, datadir, account), lambda: _rmtree(workdir)):
        _initdb(bindir, datadir, workdir, account)
        _configure_postgres(datadir, workdir, {**_PG_SETTINGS, **(settings or {})})
        port = _start_postgres(bindir, datadir, workdir, account, timeout)
        yield PostgresServer("127.0.0.1", port, PG_SUPERUSER, bindir, workdir)


def _initdb(bindir: Path, datadir: Path, workdir: Path, account: pwd.struct_passwd | None) -> None:
    cmd = [str(bindir / "initdb"), "-D", str(datadir), "-U", PG_SUPERUSER]
    cmd += ["--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"]
    _run_checked(_as_user(cmd, account), what="initdb", cwd=workdir, timeout=120)


def _configure_postgres(datadir: Path, workdir: Path, settings: Mapping[str, str]) -> None:
    socket_dir = str(workdir)
    # unix socket paths are limited to ~107 bytes; fall back to TCP only.
    sockets = f"'{socket_dir}'" if len(socket_dir) < 80 and "'" not in socket_dir else "''"
    lines = [f"unix_socket_directories = {sockets}"]
    lines += [f"{name} = {value}" for name, value in settings.items()]
    with (datadir / "postgresql.conf").open("a", encoding="utf-8") as conf:
        conf.write("\n# proctor test settings\n" + "\n".join(lines) + "\n")


def _start_postgres(
    bindir: Path, datadir: Path, workdir: Path, account: pwd.struct_passwd | None, timeout: float
) -> int:
    """Start the postmaster on a free port (retrying if the port was taken); return it."""
    log = workdir / "postgres.log"
    for attempt in range(1, _START_ATTEMPTS + 1):
        port = free_port()
        cmd = [str(bindir / "pg_ctl"), "start", "-D", str(datadir), "-l", str(log)]
        cmd += ["-w", "-t", str(int(timeout)), "-o", f"-p {port}"]
        result = _run(_as_user(cmd, account), cwd=workdir, timeout=timeout + 10)
        if result.returncode == 0:
            _wait_for_port(port, timeout, what="PostgreSQL", log=log)
            return port
        if _PORT_IN_USE not in _tail(log) or attempt == _START_ATTEMPTS:
            raise ServiceStartError(_failure_message("pg_ctl start", result, log))
    raise AssertionError("unreachable")


def _stop_postgres(bindir: Path, datadir: Path, account: pwd.struct_passwd | None) -> None:
    """Stop the postmaster (immediate mode); SIGKILL it if ``pg_ctl`` fails."""
    pidfile = datadir / "postmaster.pid"
    if not pidfile.exists():
        return
    cmd = [str(bindir / "pg_ctl"), "stop", "-D", str(datadir), "-m", "immediate", "-w", "-t", "10"]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        if _run(_as_user(cmd, account), cwd=datadir.parent, timeout=20).returncode == 0:
            return
    with contextlib.suppress(OSError, ValueError, IndexError):
        os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)


def stop_postgres_immediately(server: PostgresServer) -> None:
    """``pg_ctl stop -m immediate``: the postmaster dies without a checkpoint (as in a crash)."""
    _pg_ctl(server, "stop", "-m", "immediate", "-w", "-t", "20")


def start_postgres_again(server: PostgresServer) -> None:
    """``pg_ctl start`` on the same data directory and port; waits for crash recovery."""
    log = server.socket_dir / "postgres.log"
    _pg_ctl(server, "start", "-l", str(log), "-w", "-t", "30", "-o", f"-p {server.port}")
    _wait_for_port(server.port, 30, what="PostgreSQL", log=log)


def _pg_ctl(server: PostgresServer, *args: str, timeout: float = 60.0) -> None:
    """Run ``pg_ctl ARGS`` on ``server``'s data directory (as the ``postgres`` system user when
    we are root); a failure fails the test."""
    datadir = server.socket_dir / "data"
    cmd = [str(server.bindir / "pg_ctl"), *args, "-D", str(datadir)]
    result = _run(_as_user(cmd, _service_account()), cwd=server.socket_dir, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------- #
# Redis
# --------------------------------------------------------------------------- #


@contextlib.contextmanager
def redis_server(
    binary: Path | None = None,
    extra_args: Sequence[str] = (),
    timeout: float = READY_TIMEOUT,
) -> Iterator[RedisServer]:
    """Run a fresh, non-persistent ``redis-server`` for the ``with`` block.

    ``extra_args`` are appended to the command line (e.g. ``["--maxmemory", "10mb"]``).
    """
    binary = binary or find_redis_server()
    if binary is None or not _is_executable(binary):
        raise ServiceNotFoundError(f"redis-server not found (looked in {binary or 'PATH'})")
    workdir = _make_workdir("proctor-redis-", None)
    procs: list[subprocess.Popen[bytes]] = []
    with _Teardown(lambda: _stop_processes(procs), lambda: _rmtree(workdir)):
        port = _start_redis(binary, workdir, extra_args, timeout, procs)
        yield RedisServer("127.0.0.1", port)


def _start_redis(
    binary: Path,
    workdir: Path,
    extra_args: Sequence[str],
    timeout: float,
    procs: list[subprocess.Popen[bytes]],
) -> int:
    """Start redis on a free port (retrying if the port was taken); return it."""
    log = workdir / "redis.log"
    for attempt in range(1, _START_ATTEMPTS + 1):
        port = free_port()
        proc = _popen_redis(binary, port, workdir, extra_args)
        procs.append(proc)
        if _wait_for_redis(proc, port, timeout):
            return port
        if _PORT_IN_USE not in _tail(log) or attempt == _START_ATTEMPTS:
            break
    raise _redis_failed(procs[-1], log)


def start_redis_on(
    binary: Path, port: int, workdir: Path, timeout: float = READY_TIMEOUT
) -> subprocess.Popen[bytes]:
    """``redis-server`` on the given ``port`` with the settings of ``redis_server`` (for a test
    that kills Redis and starts it again where the server under test expects it); returns
    once it answers ``PING``. The caller stops the process."""
    proc = _popen_redis(binary, port, workdir, ())
    if not _wait_for_redis(proc, port, timeout):
        raise _redis_failed(proc, workdir / "redis.log")
    return proc


def _popen_redis(
    binary: Path, port: int, workdir: Path, extra_args: Sequence[str]
) -> subprocess.Popen[bytes]:
    """Start a non-persistent ``redis-server`` on 127.0.0.1:``port``, logging to
    ``workdir/redis.log``; does not wait."""
    cmd = [str(binary), "--save", "", "--appendonly", "no", "--port", str(port)]
    cmd += ["--bind", "127.0.0.1", "--daemonize", "no", "--dir", str(workdir), *extra_args]
    with (workdir / "redis.log").open("ab") as log_file:
        return subprocess.Popen(
            cmd,
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _redis_failed(proc: subprocess.Popen[bytes], log: Path) -> ServiceStartError:
    return ServiceStartError(
        f"redis-server failed to start (exit code {proc.poll()}; command: {proc.args!r})\n"
        f"--- {log} (tail) ---\n{_tail(log)}"
    )


def _wait_for_redis(proc: subprocess.Popen[bytes], port: int, timeout: float) -> bool:
    """True once ``PING`` answers ``+PONG``; False if the process exited first.

    Raises ``ServiceStartError`` on timeout (after killing the process).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if redis_ping(port) and proc.poll() is None:
            return True
        time.sleep(0.02)
    _stop_processes([proc])
    raise ServiceStartError(f"redis-server did not answer PING within {timeout:.0f}s")


def redis_ping(port: int) -> bool:
    """True if a Redis server on 127.0.0.1:``port`` answers ``PING``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _stop_processes(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


# --------------------------------------------------------------------------- #
# Shared helpers
# --------------------------------------------------------------------------- #


class _Teardown:
    """Run cleanup actions once: on ``with`` exit or, as a backup, at interpreter exit."""

    def __init__(self, *actions: Callable[[], None]) -> None:
        self._actions = actions
        self._done = False

    def __enter__(self) -> _Teardown:
        atexit.register(self.run)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.run()

    def run(self) -> None:
        """Run every action (errors suppressed) unless already done."""
        if self._done:
            return
        self._done = True
        atexit.unregister(self.run)
        for action in self._actions:
            with contextlib.suppress(Exception):
                action()


def _service_account() -> pwd.struct_passwd | None:
    """Unprivileged account to run PostgreSQL as, or ``None`` when not root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise ServiceStartError("running as root, but neither user 'postgres' nor 'nobody' exists")


def _as_user(cmd: list[str], account: pwd.struct_passwd | None) -> list[str]:
    """Prefix ``cmd`` so that it runs as ``account`` (unchanged when ``None``)."""
    if account is None:
        return cmd
    runuser = _which_sbin("runuser")
    if runuser:
        return [runuser, "-u", account.pw_name, "--", *cmd]
    setpriv = _which_sbin("setpriv")
    if setpriv:
        ids = [f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--init-groups"]
        return [setpriv, *ids, "--", *cmd]
    raise ServiceStartError("running as root, but neither runuser nor setpriv is installed")


def _which_sbin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = (Path(d) / name for d in _RUNUSER_DIRS)
    return next((str(path) for path in candidates if _is_executable(path)), None)


def _make_workdir(prefix: str, account: pwd.struct_passwd | None) -> Path:
    """A fresh private temp directory, owned by ``account`` when given."""
    base = tempfile.gettempdir()
    if account is not None and not _traversable_by_others(Path(base)):
        base = "/tmp"  # e.g. TMPDIR under /root: the service account could not enter it
    workdir = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    if account is not None:
        os.chown(workdir, account.pw_uid, account.pw_gid)
    return workdir


def _traversable_by_others(path: Path) -> bool:
    resolved = path.resolve()
    return all(os.stat(p).st_mode & stat.S_IXOTH for p in (resolved, *resolved.parents))


def _rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _clean_env() -> dict[str, str]:
    """Environment without ``PG*`` variables (they would redirect the tools)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    env["LC_ALL"] = "C"
    return env


def _run(cmd: list[str], cwd: Path | None, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd,
        cwd=cwd,
        env=_clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _run_checked(cmd: list[str], what: str, cwd: Path | None, timeout: float) -> None:
    try:
        result = _run(cmd, cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ServiceStartError(f"{what} timed out after {timeout:.0f}s: {cmd}") from exc
    if result.returncode != 0:
        raise ServiceStartError(_failure_message(what, result, log=None))


def _wait_for_port(port: int, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.02)
    raise ServiceStartError(
        f"{what} did not accept TCP connections on 127.0.0.1:{port} within {timeout:.0f}s\n"
        f"--- {log} (tail) ---\n{_tail(log)}"
    )


def _failure_message(what: str, result: subprocess.CompletedProcess[str], log: Path | None) -> str:
    message = f"{what} failed (exit code {result.returncode}; command: {result.args})"
    output = (result.stdout + result.stderr).strip()
    if output:
        message += f"\n--- output ---\n{output[-4000:]}"
    if log is not None:
        message += f"\n--- {log} (tail) ---\n{_tail(log)}"
    return message


def _tail(path: Path, lines: int = 40) -> str:
    """Last ``lines`` lines of a log file ('' if it cannot be read)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
