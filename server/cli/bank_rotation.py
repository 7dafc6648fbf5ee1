"""``proctor bank rotate-key`` and ``proctor bank new-key``: the keys sealing the bank at
rest (``bank.sealing``, ``server.bank_keys``).

Rotating: generate an entry with ``new-key``, append it to every process's keys (the last
entry is the active key) and restart them, run ``rotate-key`` (every sealed value not under
the active key, clear ones included, is sealed again, batch by batch), check with
``rotate-key --check`` that nothing is left under the old key id, then drop the old entry.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import TYPE_CHECKING, Annotated

import typer

from server.cli.options import JsonFlag
from server.cli.output import fail, stderr

if TYPE_CHECKING:
    from bank.resealing import Resealed
    from bank.sealing import Keyring


def rotate_key_command(
    check: Annotated[
        bool,
        typer.Option("--check", help="Only count the sealed values under each key id."),
    ] = False,
    batch: Annotated[
        int, typer.Option("--batch", min=1, max=100_000, help="Rows per transaction.")
    ] = 1000,
    as_json: JsonFlag = False,
) -> None:
    """Seal every value again under the active key (the last).

    Reference answers, explanations, answers and judge notes. Each batch is its own
    transaction: interrupted, it resumes when run again; run twice, the second run changes
    nothing. Old keys must still be in the keyring to open the values under them."""
    from bank.sealing import SealError
    from server.config import get_settings
    from server.database import upgrade

    keyring = _keyring()
    settings = get_settings()
    url = settings.effective_database_url
    if settings.is_embedded:
        upgrade(url)
    if check:
        counts = asyncio.run(_count(url))
        _print_counts(counts, keyring, as_json)
        return
    try:
        done = asyncio.run(_rotate(url, keyring, batch))
    except SealError as error:
        fail(f"{error}; the batches before it are done, nothing after it")
    _print_done(done, keyring, as_json)


def new_key_command(
    key_id: Annotated[
        str, typer.Option("--id", help="The key id, [A-Za-z0-9_-]{1,32}; unique in the keyring.")
    ] = "k1",
) -> None:
    """Print a fresh key entry, KEY_ID:BASE64 (32 random bytes).

    Append it to PROCTOR_BANK_KEY_FILE (or PROCTOR_BANK_KEYS, comma-separated) of every
    process, where it becomes the active key; nothing is written anywhere else."""
    from bank.sealing import BankKeyError, new_entry

    try:
        typer.echo(new_entry(key_id))
    except BankKeyError as error:
        raise typer.BadParameter(str(error)) from None


def _keyring() -> Keyring:
    from bank.sealing import BankKeyError, current

    try:
        return current()  # installed by the root command (server.cli.main)
    except BankKeyError as error:
        fail(str(error))


async def _count(url: str) -> dict[str, Counter[str]]:
    from bank.resealing import count_by_key, sealed_columns
    from server.database import create_engine
    from server.models import metadata

    engine = create_engine(url)
    try:
        return await count_by_key(engine, sealed_columns(metadata))
    finally:
        await engine.dispose()


async def _rotate(url: str, keyring: Keyring, batch: int) -> list[Resealed]:
    from bank.resealing import reseal, sealed_columns
    from server.database import create_engine
    from server.models import metadata

    engine = create_engine(url)

    def progress(column: str, rows: int) -> None:
        stderr.print(f"{column}: {rows} rows re-sealed", markup=False)

    try:
        return await reseal(
            engine, sealed_columns(metadata), batch=batch, keyring=keyring, progress=progress
        )
    finally:
        await engine.dispose()


def _print_counts(counts: dict[str, Counter[str]], keyring: Keyring, as_json: bool) -> None:
    from bank.resealing import CLEAR

    stale = sum(n for c in counts.values() for key, n in c.items() if key != keyring.active_id)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "active_key": keyring.active_id,
                    "columns": {name: dict(c) for name, c in counts.items()},
                    "not_under_active_key": stale,
                },
                indent=2,
            )
        )
        return
    for name, counter in counts.items():
        shown = ", ".join(
            f"{n} {'in clear' if key == CLEAR else f'under {key}'}"
            for key, n in sorted(counter.items())
        )
        typer.echo(f"{name}: {shown or 'no values'}")
    typer.echo(f"active key {keyring.active_id}: {stale} values to re-seal")


def _print_done(done: list[Resealed], keyring: Keyring, as_json: bool) -> None:
    total = sum(d.rows for d in done)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "active_key": keyring.active_id,
                    "columns": {d.column: {"rows": d.rows, "batches": d.batches} for d in done},
                    "rows": total,
                },
                indent=2,
            )
        )
        return
    for d in done:
        typer.echo(f"{d.column}: {d.rows} rows re-sealed in {d.batches} batches")
    typer.echo(f"{total} rows re-sealed; every sealed value is under key {keyring.active_id}")
