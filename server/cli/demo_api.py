"""The demo's Proctor API in a child process of its own, so that it has a core to itself
while the evaluator runner and the local models take the other (in one process they would
share one interpreter lock, and the demo would use one core of two).

:class:`ApiProcess` starts ``python -m server.cli.demo_api`` at once, so the child imports
the application while the parent imports the bank and calibrates the judge; the settings
follow later, pickled on the child's standard input. The child serves until its standard
input closes, then stops like any server (lifespan shutdown: the scoring worker ends).
Its root URL comes back on a pipe of its own: the child's log keeps the parent's console.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
from types import TracebackType
from typing import IO

from server.config import Settings

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


class ApiProcess:
    """The child process serving Proctor's API (see the module doc). Use as a context
    manager: leaving it stops the child (and kills it if it does not stop in time)."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self._url_pipe = os.fdopen(read_fd, "rb")
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "server.cli.demo_api", str(write_fd)],
                stdin=subprocess.PIPE,
                pass_fds=(write_fd,),
            )
        finally:
            os.close(write_fd)

    def start(self, settings: Settings) -> str:
        """Hand the child its settings; its root URL (``http://127.0.0.1:port``) once it
        serves. RuntimeError if it exits first."""
        stdin = self._stdin()
        stdin.write(pickle.dumps(settings))
        stdin.flush()
        line = self._url_pipe.readline().decode().strip()
        if not line.startswith("http://"):
            raise RuntimeError(f"the demo's API process did not start (exit {self.stop()})")
        return line

    def stop(self) -> int:
        """Close the child's input and wait for it to stop; its exit status."""
        stdin = self._process.stdin
        if stdin is not None and not stdin.closed:
            with contextlib.suppress(BrokenPipeError):  # the child is gone already
                stdin.close()
        try:
            return self._process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            return self._process.wait()
        finally:
            self._url_pipe.close()

    def _stdin(self) -> IO[bytes]:
        stdin = self._process.stdin
        if stdin is None:
            raise RuntimeError("the demo's API process has no input")
        return stdin

    def __enter__(self) -> ApiProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def serve(url_fd: int) -> None:
    """The child's side: read the settings, serve, write the root URL to ``url_fd``, and
    serve until standard input closes."""
    from server.app import create_app
    from server.bank_keys import install_keyring
    from server.threaded import serve_in_thread

    try:
        settings = pickle.load(sys.stdin.buffer)  # from our own parent: trusted
    except EOFError:  # the parent stopped before the API was needed
        return
    install_keyring(settings)
    with (
        serve_in_thread(create_app(settings), lifespan="on") as root,
        os.fdopen(url_fd, "w") as url_pipe,
    ):
        url_pipe.write(root + "\n")
        url_pipe.flush()
        sys.stdin.buffer.read()


if __name__ == "__main__":
    # Ctrl-C reaches the whole process group: the parent reports it, the child just ends.
    with contextlib.suppress(KeyboardInterrupt):
        serve(int(sys.argv[1]))
