"""``proctor audit verify``: the hash-chained logs against their signed checkpoints.

Reads the database of the settings, like the other admin commands; the keys trusted are
the configured signing key's public part and every ``--public-key`` file. Exit status 0
when everything verifies, 1 with the first failing row of each chain, 2 for bad input.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from sqlalchemy.ext.asyncio import AsyncSession

from server.cli.groups import example
from server.cli.output import fail, stdout
from server.cli.unit_of_work import run_in_unit_of_work
from server.config import get_settings
from server.errors import InvalidInput
from server.ledger.chain import Log
from server.ledger.checkpoints import is_authentic
from server.ledger.models import ChainCheckpoint
from server.ledger.results import VerdictReport, check_verdicts, describe, summary
from server.ledger.results import as_json as verdicts_json
from server.ledger.signing import PublicKey, SigningKeyError, load_signing_key, parse_public
from server.ledger.verify import LogReport, LogSpec, specs, verify_from, verify_log

BAD_INPUT = 2
CHECKPOINT_FIELDS = (
    "id",
    "log",
    "chain",
    "last_row_id",
    "n_rows",
    "head_hash",
    "prev_checkpoint_hash",
    "checkpoint_hash",
    "at",
    "key_id",
    "signature",
)


class LogChoice(StrEnum):
    AUDIT = "audit"
    RESULTS = "results"
    ALL = "all"


def verify_command(
    from_checkpoint: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="Trusted checkpoint to walk from: its id, or a JSON file of a checkpoint "
            "as GET /v1/audit/checkpoints returns it.",
        ),
    ] = None,
    log_choice: Annotated[
        LogChoice, typer.Option("--log", help="Which log to verify.")
    ] = LogChoice.ALL,
    public_keys: Annotated[
        list[Path] | None,
        typer.Option(
            "--public-key",
            help="A public key to trust (base64 of the raw key, or PEM); repeatable.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Verify the hash-chained audit log and results ledger.

    Walks every chain in id order against its signed checkpoints and prints the first row
    of each chain that does not verify: edited, a broken link (a row deleted before it or
    inserted), rows missing after a checkpoint, an unchained row inserted, a checkpoint
    with a bad signature. Then (results log, no --from) compares every current verdict with
    its latest ledger entry and prints each verdict changed, deleted or written without an
    entry. Exit status 0 when everything verifies, 1 otherwise, 2 for bad input.
    """
    keys = _keys(public_keys or [])
    chosen = _specs(log_choice)
    anchor_text = from_checkpoint

    async def work(session: AsyncSession) -> list[LogReport]:
        if anchor_text is None:
            return [await verify_log(session, spec, keys) for spec in chosen]
        anchor = await _anchor(session, anchor_text, keys)
        spec = specs().get(Log(anchor.log))
        if spec is None:
            fail(f"--from: log {anchor.log!r} is not known", code=BAD_INPUT)
        return [await verify_from(session, spec, anchor, keys)]

    reports = run_in_unit_of_work(work)
    verdicts = None  # every current verdict against its latest ledger entry
    if log_choice is not LogChoice.AUDIT and anchor_text is None:
        verdicts = run_in_unit_of_work(check_verdicts)
    _print(reports, as_json=as_json, verdicts=verdicts)
    if not all(report.ok for report in reports) or (verdicts is not None and not verdicts.ok):
        raise typer.Exit(1)


def _keys(paths: list[Path]) -> dict[str, PublicKey]:
    """The configured key's public part (if one is configured) and the ``--public-key``s."""
    keys: dict[str, PublicKey] = {}
    try:
        public = load_signing_key(get_settings()).public
        keys[public.key_id] = public
    except SigningKeyError as error:
        if not paths:
            fail(f"{error} (or pass --public-key)", code=BAD_INPUT)
    for path in paths:
        try:
            key = parse_public(path.read_text(encoding="utf-8"), source=str(path))
        except (OSError, UnicodeDecodeError) as error:
            fail(f"--public-key {path}: cannot be read ({type(error).__name__})", code=BAD_INPUT)
        except InvalidInput as error:
            fail(error.detail, code=BAD_INPUT)
        keys[key.key_id] = key
    return keys


def _specs(choice: LogChoice) -> list[LogSpec]:
    with contextlib.suppress(ModuleNotFoundError):  # the results ledger registers its spec
        importlib.import_module("server.ledger.results")
    known = specs()
    if choice is LogChoice.ALL:
        return [known[log] for log in Log if log in known]
    spec = known.get(Log(choice.value))
    if spec is None:
        fail(f"--log {choice.value}: this log is not available", code=BAD_INPUT)
    return [spec]


async def _anchor(session: AsyncSession, text: str, keys: dict[str, PublicKey]) -> ChainCheckpoint:
    """The trusted checkpoint ``--from`` names, its signature checked."""
    if text.isdigit():
        anchor = await session.get(ChainCheckpoint, int(text))
        if anchor is None:
            fail(f"--from: no checkpoint {text}", code=BAD_INPUT)
        if not is_authentic(anchor, keys):
            fail(f"--from: checkpoint {text} is not signed by a known key", code=1)
        return anchor
    anchor = _checkpoint_file(Path(text))
    if not is_authentic(anchor, keys):
        fail(f"--from {text}: the checkpoint is not signed by a known key", code=BAD_INPUT)
    return anchor


def _checkpoint_file(path: Path) -> ChainCheckpoint:
    """A checkpoint from a JSON file (the API's form); exit 2 if it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        values = {name: data[name] for name in CHECKPOINT_FIELDS}
        values["at"] = datetime.fromisoformat(str(values["at"]).replace("Z", "+00:00"))
        Log(values["log"])
        for name in ("id", "last_row_id", "n_rows"):
            if not isinstance(values[name], int) or isinstance(values[name], bool):
                raise TypeError(name)
        for name in ("log", "chain", "head_hash", "checkpoint_hash", "key_id", "signature"):
            if not isinstance(values[name], str):
                raise TypeError(name)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        fail(f"--from {path}: not a checkpoint ({type(error).__name__}: {error})", code=BAD_INPUT)
    return ChainCheckpoint(**values)


def _print(
    reports: list[LogReport], *, as_json: bool, verdicts: VerdictReport | None = None
) -> None:
    verdicts_ok = verdicts is None or verdicts.ok
    if as_json:
        out: dict[str, Any] = {
            "ok": all(report.ok for report in reports) and verdicts_ok,
            "logs": [dataclasses.asdict(report) for report in reports],
            "verdicts": None if verdicts is None else verdicts_json(verdicts),
        }
        stdout.print_json(json.dumps(out, default=str))
        return
    if verdicts is not None:
        for line in [summary(verdicts)] + [f"  {describe(f)}" for f in verdicts.findings]:
            stdout.print(line, markup=False, highlight=False)
    for report in reports:
        n_rows = sum(chain.n_rows for chain in report.chains)
        state = "ok" if report.ok else "FAILED"
        stdout.print(
            f"{report.log.value}: {state}: {len(report.chains)} chain(s), {n_rows} row(s) "
            f"verified, {report.n_legacy_rows} written before chaining (unchained)",
            markup=False,
            highlight=False,
        )
        for failure in report.failures:
            where = f"chain {failure.chain}" if failure.chain else "no chain"
            detail = f" ({failure.detail})" if failure.detail else ""
            stdout.print(
                f"  {where}: row {failure.row_id}: {failure.reason.value}{detail}",
                markup=False,
                highlight=False,
            )


def add_commands(app: typer.Typer) -> None:
    """Add this module's commands to the proctor audit group."""
    app.command(
        "verify",
        epilog=example(
            "proctor audit verify",
            "proctor audit verify --from checkpoint.json --public-key audit.pub --json",
        ),
    )(verify_command)
