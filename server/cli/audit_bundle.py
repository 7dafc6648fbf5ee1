"""``proctor audit export``, ``check`` and ``public-key``: a session's signed bundle.

``export`` reads the database like the other admin commands and writes the bundle
(``server.bundles.format``) of one session; ``check`` verifies a bundle offline (no
database, no network; exit status 0 verified against a trusted key, 1 problems found or
origin not checked, 2 unreadable input);
``public-key`` prints the configured signing key's public part, for auditors to pin.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from server.cli.groups import example
from server.cli.output import fail, stderr, stdout

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from server.bundles.check import BundleCheck
    from server.ledger.signing import PublicKey, SigningKey

PROBLEMS = 1
UNREADABLE = 2


def export_command(
    session_id: Annotated[uuid.UUID, typer.Argument(help="The session to export.")],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the bundle to this file (default: stdout)."),
    ] = None,
) -> None:
    """Write a session's signed bundle from the database.

    The bundle holds the delivered items without their reference answers or explanations,
    the answers, the verdicts, the sample commitment (opened once the session is scored)
    and an Ed25519 signature by the server's audit key. Reads the database directly (run it
    where the server's PROCTOR_ settings are, signing key included).
    """
    key = _signing_key()
    if output is None:
        _export(session_id, key, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return
    draft = output.with_name(f".{output.name}.{os.getpid()}.partial")
    try:
        with draft.open("wb") as out:
            _export(session_id, key, out)
        draft.replace(output)
    finally:
        draft.unlink(missing_ok=True)
    stderr.print(f"wrote {escape(str(output))}")


def _export(session_id: uuid.UUID, key: SigningKey, out: IO[bytes]) -> None:
    from server.bundles.service import session_bundle
    from server.cli.unit_of_work import run_read_only

    async def work(db: AsyncSession) -> None:
        async for line in session_bundle(db, session_id, key=key, now=datetime.now(UTC)):
            out.write(line)

    run_read_only(work)


def check_command(
    bundle: Annotated[Path, typer.Argument(help="The bundle file ('-' for stdin).")],
    public_key: Annotated[
        Path | None,
        typer.Option(
            "--public-key",
            help="The server's public key you trust (base64 of the raw key, or PEM). "
            "Without it (or --integrity-only) the check fails: who signed is not checked.",
        ),
    ] = None,
    integrity_only: Annotated[
        bool,
        typer.Option(
            "--integrity-only",
            help="Without --public-key, exit 0 for an intact bundle signed by the key it "
            "names: anyone can sign with a key of their own, so this proves no origin.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Check a session bundle offline: hash, signature, commitment.

    Exit status 0 if it verifies against the --public-key you trust, 1 if problems were
    found (each printed as line N: field: what) or no --public-key was given (a forger signs
    with a key of their own; --integrity-only accepts an intact bundle without one, its
    origin unchecked), 2 if the bundle or key cannot be read. Needs no database and no
    network.
    """
    from server.bundles.check import check_bundle

    trusted = _public_key(public_key) if public_key is not None else None
    try:
        if str(bundle) == "-":
            result = check_bundle(sys.stdin.buffer, public_key=trusted)
        else:
            with bundle.open("rb") as stream:
                result = check_bundle(stream, public_key=trusted)
    except OSError as error:
        fail(
            f"{bundle}: cannot be read ({error.strerror or type(error).__name__})", code=UNREADABLE
        )
    if as_json:
        print(json.dumps(result.as_json(), sort_keys=True, indent=2))
    else:
        _print(result, integrity_only=integrity_only)
    if not (result.ok or (integrity_only and result.intact)):
        if result.intact:
            stderr.print("origin not checked: pass --public-key (or --integrity-only)")
        raise typer.Exit(PROBLEMS)


def _print(result: BundleCheck, *, integrity_only: bool) -> None:
    for problem in result.problems:
        stdout.print(escape(str(problem)))
    if result.n_problems > len(result.problems):
        stdout.print(f"... and {result.n_problems - len(result.problems)} more problems")
    counts = ", ".join(f"{n} {kind}" for kind, n in sorted(result.counts.items()))
    stdout.print(f"session {result.session_id} ({result.state}): {result.n_lines} lines ({counts})")
    if result.commitment_revealed:
        verdict = "recomputes" if result.commitment_valid else "DOES NOT recompute"
        stdout.print(f"commitment {result.commitment}: opened, {verdict}")
    else:
        stdout.print(f"commitment {result.commitment}: not opened (session not scored yet)")
    if not result.intact:
        stdout.print(f"FAILED: {result.n_problems} problem(s)")
    elif result.origin_checked:
        stdout.print(f"verified: signed by the trusted key {result.key_id}")
    else:
        verdict = "integrity only" if integrity_only else "NOT VERIFIED"
        stdout.print(
            f"{verdict}: the bundle is intact and signed by the key it names "
            f"({result.key_id}), but no --public-key was given, so who signed it is NOT "
            "checked (anyone can sign with a key of their own)"
        )


def public_key_command(
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the key to this file (default: stdout)."),
    ] = None,
) -> None:
    """Print the signing key's public part, for auditors to pin.

    Base64 of the raw Ed25519 public key (the configured ``PROCTOR_AUDIT_SIGNING_KEY``).

    The key id goes to stderr. Give the file to ``proctor audit check --public-key`` and
    ``proctor audit verify --public-key``.
    """
    public = _signing_key().public
    if output is None:
        print(public.raw_b64)
    else:
        output.write_text(public.raw_b64 + "\n", encoding="ascii")
    stderr.print(f"key id {public.key_id}")


def _signing_key() -> SigningKey:
    from server.config import get_settings
    from server.ledger.signing import SigningKeyError, load_signing_key

    try:
        return load_signing_key(get_settings())
    except SigningKeyError as error:
        fail(str(error), code=UNREADABLE)


def _public_key(path: Path) -> PublicKey:
    from server.bundles.check import load_public_key
    from server.errors import InvalidInput

    try:
        return load_public_key(path.read_text(encoding="utf-8"), source=str(path))
    except (OSError, UnicodeDecodeError) as error:
        fail(f"--public-key {path}: cannot be read ({type(error).__name__})", code=UNREADABLE)
    except InvalidInput as error:
        fail(error.detail, code=UNREADABLE)


def add_commands(app: typer.Typer) -> None:
    """Add this module's commands to the proctor audit group."""
    app.command("export", epilog=example("proctor audit export 3f2b9c1e-... -o session.jsonl"))(
        export_command
    )
    app.command(
        "check", epilog=example("proctor audit check session.jsonl --public-key audit.pub")
    )(check_command)
    app.command("public-key", epilog=example("proctor audit public-key -o audit.pub"))(
        public_key_command
    )
