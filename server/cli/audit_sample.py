"""``proctor audit sample``: re-derive a session's sample from its seed.

Reads the database of the settings, like the other admin commands (in one read-only
snapshot: the server's writers go on meanwhile), draws the session's
sample again on the bank and exposure state as of its ``drawn_at``
(``server.sample_audit``) and compares. Exit status 0 when it matches, 1 when it does not
(the first difference is printed) or cannot be re-derived (the reason is printed), 2 for
bad input (not a session id, no such session).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Annotated

import typer

from server.cli.groups import example
from server.cli.output import fail, stdout

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from server.sample_audit.schemas import SampleAuditOut

BAD_INPUT = 2


def sample_command(
    session_id: Annotated[str, typer.Argument(help="The session's id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Re-derive a session's sample from its seed.

    Draws the sample again with the live draw's code on the bank and the organisation's
    exposure as they were when it was drawn, and compares it with the stored sample: the
    same items in drawn order (adaptive sessions: the same set), every delivered item
    among them. Exit status 0 when it matches, 1 when it does not or cannot be
    re-derived, 2 for bad input.
    """
    from server.cli.unit_of_work import run_read_only
    from server.errors import NotFound
    from server.sample_audit.service import audit_session_id

    try:
        wanted = uuid.UUID(session_id)
    except ValueError:
        fail(f"not a session id: {session_id!r}", code=BAD_INPUT)

    async def work(session: AsyncSession) -> SampleAuditOut | None:
        try:
            return await audit_session_id(session, wanted)
        except NotFound:
            return None

    report = run_read_only(work)
    if report is None:
        fail(f"no session {wanted}", code=BAD_INPUT)
    _print(report, as_json=as_json)
    if not report.ok:
        raise typer.Exit(1)


def _print(report: SampleAuditOut, *, as_json: bool) -> None:
    from bank.sampling.rederive import Outcome

    if as_json:
        stdout.print_json(data={"ok": report.ok, **report.model_dump(mode="json")})
        return
    kind = report.kind.value if report.kind else "unknown kind"
    lines = [
        f"session {report.session_id} ({report.mode.value}, {report.state.value}), sample "
        f"{report.sample_id} ({kind}) drawn at {report.drawn_at}",
        f"outcome: {report.outcome.value}: {report.n_stored} stored, "
        f"{report.n_rederived} re-derived",
    ]
    if report.outcome is Outcome.NOT_REDERIVABLE:
        lines.append(f"  not re-derivable: {report.reason}")
    difference = report.first_difference
    if difference is not None:
        lines.append(
            f"  first difference at drawn index {difference.index} (position "
            f"{difference.position}): expected {difference.expected}, stored {difference.stored}"
        )
    if report.shortfall_equal is False:
        lines.append("  the recorded shortfall differs from the re-derived one")
    delivered = report.delivered
    if delivered.all_in_rederived is False:
        lines.append(
            f"  delivered item {delivered.first_missing_item} at position "
            f"{delivered.first_missing_position} is not in the re-derived sample "
            f"(delivered positions not in it: {delivered.missing_positions})"
        )
    elif delivered.all_in_rederived:
        lines.append(f"  all {delivered.n_delivered} delivered items are in the re-derived sample")
    if report.adaptive is not None:
        adaptive = report.adaptive
        lines.append(
            f"  adaptive ({adaptive.policy}): same set: {adaptive.same_set}; "
            f"{len(adaptive.policy_steps)} recorded policy steps"
        )
    if report.history_breaks:
        lines.append(
            f"  warning: {len(report.history_breaks)} item(s) whose status history since the "
            f"draw does not chain, e.g. {report.history_breaks[0]}"
        )
    for line in lines:
        stdout.print(line, markup=False, highlight=False)


def add_commands(app: typer.Typer) -> None:
    """Add this module's commands to the proctor audit group."""
    app.command(
        "sample",
        epilog=example(
            "proctor audit sample 3f2b9c1e-5d4a-4c2b-9e1f-0a1b2c3d4e5f",
            "proctor audit sample 3f2b9c1e-5d4a-4c2b-9e1f-0a1b2c3d4e5f --json",
        ),
    )(sample_command)
