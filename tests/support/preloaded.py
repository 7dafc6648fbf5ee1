"""``proctor`` commands in processes forked from one that has imported Proctor already.

A fresh ``python -m server ...`` spends most of a short command's time importing (SQLAlchemy,
Alembic, the app's modules); the suite runs hundreds of them. Here one helper process (the
*zygote*) imports every module of Proctor once; each command then runs in a child forked from
it, a process of its own with its own arguments, environment, working directory, standard
streams and exit status, as ``subprocess.run`` would give, minus the imports. This is the
forkserver of ``multiprocessing`` applied to a command line.

What a fork cannot show, a fresh interpreter still does: the tests of start-up itself (help
pages, settings refused before anything runs, ``proctor serve``, crash tests) start
``python -m server`` as before, and ``PROCTOR_TEST_FRESH_PROCESSES=1`` sends every command
through a fresh interpreter (``tests.support.cli``).

The protocol, over a Unix socket per call: the caller sends one JSON line (``argv``, ``env``,
``cwd``, ``timeout``) with the open files for the command's stdout and stderr attached
(``SCM_RIGHTS``); the zygote forks a waiter, the waiter forks the command and answers one JSON
line, ``{"returncode": N}`` or ``{"timeout": true}`` (the command killed). Each call gets its
own waiter, so calls from several threads run side by side.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import locale
import os
import pkgutil
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PACKAGES = ("bank", "judge", "clients", "fakellm", "server")
"""What the zygote imports: all of Proctor (but ``__main__`` modules and migrations)."""
_SKIP = ("__main__", ".migrations.")
_READY = b"ready\n"
_START_TIMEOUT_S = 120.0


class Zygote:
    """The running zygote process and the socket it listens on."""

    def __init__(self, process: subprocess.Popen[bytes], address: str, workdir: str) -> None:
        self.process = process
        self.address = address
        self.workdir = workdir

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path | None,
        timeout: float,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``proctor ARGV`` in a child with exactly ``env``; like ``subprocess.run(...,
        capture_output=True, text=True, timeout=timeout)``, ``TimeoutExpired`` included."""
        request = {"argv": list(argv), "env": dict(env), "timeout": timeout}
        request["cwd"] = str(cwd) if cwd is not None else os.getcwd()
        with (
            tempfile.TemporaryFile() as out,
            tempfile.TemporaryFile() as err,
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn,
        ):
            conn.connect(self.address)
            payload = json.dumps(request).encode() + b"\n"
            socket.send_fds(conn, [payload], [out.fileno(), err.fileno()])
            answer = json.loads(_read_line(conn) or b'{"lost": true}')
            stdout, stderr = (_text(stream) for stream in (out, err))
        args = [sys.executable, "-m", "server", *argv]
        if answer.get("timeout"):
            raise subprocess.TimeoutExpired(args, timeout, output=stdout, stderr=stderr)
        if "returncode" not in answer:
            raise RuntimeError(f"the command zygote died during proctor {' '.join(argv)}")
        return subprocess.CompletedProcess(args, answer["returncode"], stdout, stderr)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)
        if self.process.poll() is None:
            self.process.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


_zygote: Zygote | None = None
_lock = threading.Lock()


def zygote(base_env: Mapping[str, str]) -> Zygote:
    """This process's zygote, started on first use (stopped at exit); ``base_env`` is the
    environment it imports under (every command gets its own)."""
    global _zygote
    with _lock:
        if _zygote is None or _zygote.process.poll() is not None:
            _zygote = _start(base_env)
            atexit.register(_zygote.stop)
        return _zygote


def _start(base_env: Mapping[str, str]) -> Zygote:
    workdir = tempfile.mkdtemp(prefix="proctor-zygote-")
    address = os.path.join(workdir, "socket")
    read_end, write_end = os.pipe()
    with open(os.path.join(workdir, "zygote.log"), "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.preloaded", address, str(write_end)],
            env=dict(base_env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=[write_end],
        )
    os.close(write_end)
    with os.fdopen(read_end, "rb") as ready:  # the zygote writes "ready" once it listens
        started = time.monotonic()
        line = ready.readline()
    if line != _READY:
        process.kill()
        log_tail = Path(workdir, "zygote.log").read_text(errors="replace")[-4000:]
        raise RuntimeError(
            f"the command zygote did not start ({time.monotonic() - started:.1f} s):\n{log_tail}"
        )
    return Zygote(process, address, workdir)


# --------------------------------------------------------------------------- #
# The zygote's side
# --------------------------------------------------------------------------- #


def _preload() -> None:
    """Import every module of Proctor, so that no forked command imports any."""
    for name in PACKAGES:
        package = importlib.import_module(name)
        for module in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            if not any(skip in f"{module.name}." for skip in _SKIP):
                importlib.import_module(module.name)


def _serve(address: str, ready_fd: int) -> None:
    _preload()
    gc.freeze()  # what every command inherits: its collections never rescan it (nor copy it)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # waiters are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    os.write(ready_fd, _READY)
    os.close(ready_fd)
    while True:
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            _wait_for_command(conn)  # never returns
        conn.close()


def _wait_for_command(conn: socket.socket) -> None:
    """The waiter: receive one request, fork the command, answer with its exit status."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
        while not message.endswith(b"\n"):
            message += conn.recv(1 << 20)
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            conn.close()
            _command(request, fds)  # never returns
        for fd in fds:
            os.close(fd)
        answer = _wait(pid, float(request["timeout"]))
        conn.sendall(json.dumps(answer).encode() + b"\n")
        code = 0
    finally:
        os._exit(code)


def _wait(pid: int, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"returncode": os.waitstatus_to_exitcode(status)}
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"timeout": True}
        time.sleep(0.005)


def _command(request: dict[str, Any], fds: list[int]) -> None:
    """The command: the process ``python -m server ARGV`` would be, from ``main`` on."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a new interpreter
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        devnull = os.open(os.devnull, os.O_RDONLY)
        for target, fd in ((0, devnull), (1, fds[0]), (2, fds[1])):
            os.dup2(fd, target)
        sys.argv = ["proctor", *request["argv"]]
        code = _main()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _main() -> int:
    """Run the ``proctor`` command as the interpreter would: its exit status, an uncaught
    exception printed by ``sys.excepthook``, then the ``atexit`` handlers."""
    from server.cli.main import app

    try:
        app(prog_name="proctor")
        code = 0
    except SystemExit as stop:
        code = _exit_status(stop.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    atexit._run_exitfuncs()
    return code


def _exit_status(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            return data
        data += chunk
    return data


def _text(stream: Any) -> str:
    """What ``subprocess.run(text=True)`` reads: the locale's encoding, universal newlines."""
    stream.seek(0)
    text = stream.read().decode(locale.getpreferredencoding(False))
    return str(text.replace("\r\n", "\n").replace("\r", "\n"))


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
