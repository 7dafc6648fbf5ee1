"""``proctor admin``: organisations, API keys and the anchor of relative scores."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from server.cli.groups import group, group_registrar

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

app = group(
    "admin",
    "Organisations, keys and the ranking anchor.",
    "proctor admin create-key --org Acme --role evaluator",
)
register = group_registrar(app)


@app.command("create-org")
def create_org_command(
    name: str,
    exist_ok: bool = typer.Option(False, "--exist-ok", help="Succeed if it exists already."),
    operator: bool = typer.Option(
        False,
        "--operator",
        help="The operator's own organisation: the only one whose keys may be admin or "
        "auditor, roles that act on every organisation. At most one.",
    ),
) -> None:
    """Create an organisation and print its id.

    With --exist-ok --operator an existing organisation of that name must be the operator
    already (it is never promoted)."""
    from server.cli.unit_of_work import run_in_unit_of_work
    from server.errors import Conflict
    from server.orgs.service import create_org, find_org

    async def work(session: AsyncSession) -> str:
        existing = await find_org(session, name=name) if exist_ok else None
        if existing is not None and operator and not existing.is_operator:
            raise Conflict(f"organisation {existing.name!r} exists and is not the operator")
        org = existing or await create_org(session, name=name, operator=operator)
        return str(org.id)

    typer.echo(run_in_unit_of_work(work))


@app.command("create-key")
def create_key_command(
    org: str = typer.Option(..., "--org", help="Organisation name."),
    role: str = typer.Option(
        ...,
        "--role",
        help="evaluator or vendor (own organisation), or a platform role, admin or auditor, "
        "which acts on every organisation and only the operator organisation's keys may have.",
    ),
) -> None:
    """Create an API key and print it once.

    Only its hash is stored. A platform-role key is refused unless --org is the operator
    organisation, and warned about on stderr."""
    from server.auth.permissions import PLATFORM_ROLES
    from server.auth.service import create_api_key
    from server.cli.unit_of_work import run_in_unit_of_work
    from server.orgs.service import get_org

    async def work(session: AsyncSession) -> str:
        owner = await get_org(session, name=org)
        _, key = await create_api_key(session, org_id=owner.id, role=role)
        return key

    key = run_in_unit_of_work(work)
    if role in PLATFORM_ROLES:
        typer.echo(
            f"warning: this {role} key acts on every organisation, not only {org!r}; "
            "keep it to the operator's staff",
            err=True,
        )
    typer.echo(key)


@app.command("revoke-key")
def revoke_key_command(
    key_id: Annotated[str, typer.Argument(help="The API key's id (the console's key list).")],
) -> None:
    """Revoke an API key and every token issued for it.

    A token of the key is refused at once by this database and within 5 s by every running
    server worker (each trusts a token it found live for 5 s); the sessions it leased are
    free at once."""
    from server.auth.service import revoke_api_key
    from server.cli.unit_of_work import run_in_unit_of_work

    try:
        target = uuid.UUID(key_id)
    except ValueError:
        raise typer.BadParameter(f"{key_id!r} is not an API key id (a UUID)") from None

    async def work(db: AsyncSession) -> None:
        await revoke_api_key(db, key_id=target)

    run_in_unit_of_work(work)
    typer.echo(f"revoked key {target} and its tokens")


@app.command("set-anchor")
def set_anchor_command(
    model_id: Annotated[
        str | None, typer.Argument(help="Registered model id; omit with --top.")
    ] = None,
    top: Annotated[bool, typer.Option("--top", help="Anchor on the top model again.")] = False,
) -> None:
    """Designate the anchor of relative scores.

    R = S / S_anchor x 100: every R is recomputed against it; earlier designations stay in
    the history."""
    from server.cli.unit_of_work import run_in_unit_of_work
    from server.leaderboard import anchors

    if (model_id is None) == (not top):
        raise typer.BadParameter("give a model id or --top, not both and not neither")
    target = None
    if model_id is not None:
        try:
            target = uuid.UUID(model_id)
        except ValueError:
            raise typer.BadParameter(f"{model_id!r} is not a model id (a UUID)") from None

    async def work(db: AsyncSession) -> str:
        anchor = await anchors.set_anchor(db, model_id=target, set_by="cli", now=datetime.now(UTC))
        return str(anchor.model_id) if anchor.model_id else "top model"

    typer.echo(f"anchor: {run_in_unit_of_work(work)}")
