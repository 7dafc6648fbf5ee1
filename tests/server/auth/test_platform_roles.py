"""Platform roles (admin, auditor) act on every organisation, so only keys of the operator's
organisation may have one: refused at creation elsewhere (service and CLI), and a key made
before that rule in another organisation gets no token."""

from __future__ import annotations

import logging
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from server.auth.keys import display_prefix, generate_api_key, hash_api_key
from server.auth.models import ApiKey
from server.auth.permissions import PLATFORM_ROLES, ROLE_PERMISSIONS, Permission, Role
from server.auth.service import create_api_key
from server.database import create_engine, unit_of_work
from server.errors import Conflict, InvalidInput
from server.orgs.models import Organisation
from server.orgs.service import create_org, find_operator_org
from tests.support.api import ORG_ROLES, World, login
from tests.support.cli import proctor_db
from tests.support.database import database_session


@pytest.fixture
async def engine(fresh_db_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on a fresh, empty (no organisation, so no operator) database."""
    engine = create_engine(fresh_db_url)
    yield engine
    await engine.dispose()


async def key_count(engine: AsyncEngine) -> int:
    async with unit_of_work(engine) as db:
        return int(await db.scalar(select(func.count()).select_from(ApiKey)) or 0)


def test_the_platform_roles_are_the_roles_that_reach_every_organisation_and_reviewers() -> None:
    """Reviewers score every organisation's answers in the review queue (and nothing else),
    so their keys belong to the operator too, though they hold no ``ANY_ORG``."""
    reaching = {role for role, granted in ROLE_PERMISSIONS.items() if Permission.ANY_ORG in granted}
    assert reaching == {Role.ADMIN, Role.AUDITOR}
    assert reaching | {Role.REVIEWER} == PLATFORM_ROLES
    assert ROLE_PERMISSIONS[Role.REVIEWER] == {Permission.SELF_READ, Permission.REVIEW_ANSWERS}


@pytest.mark.parametrize("role", sorted(PLATFORM_ROLES))
async def test_a_platform_key_is_refused_outside_the_operator_org_and_made_inside_it(
    engine: AsyncEngine, role: Role
) -> None:
    async with unit_of_work(engine) as db:
        acme = await create_org(db, name="Acme")
    # no operator yet: the refusal says so and how to make one
    with pytest.raises(InvalidInput) as none_yet:
        async with unit_of_work(engine) as db:
            await create_api_key(db, org_id=acme.id, role=role.value)
    assert "no operator organisation exists" in none_yet.value.detail
    assert "proctor admin create-org NAME --operator" in none_yet.value.detail
    assert f"{role.value!r} is a platform role" in none_yet.value.detail

    async with unit_of_work(engine) as db:
        ops = await create_org(db, name="Ops", operator=True)
    # now the refusal names the operator organisation
    with pytest.raises(InvalidInput) as refused:
        async with unit_of_work(engine) as db:
            await create_api_key(db, org_id=acme.id, role=role.value)
    assert "acts on every organisation" in refused.value.detail
    assert "'Acme' is not the operator" in refused.value.detail
    assert "the operator organisation is 'Ops'" in refused.value.detail
    assert await key_count(engine) == 0

    async with unit_of_work(engine) as db:
        row, key = await create_api_key(db, org_id=ops.id, role=role.value)
    assert (row.org_id, row.role, row.key_hash) == (ops.id, role.value, hash_api_key(key))
    # organisation roles stay available to every organisation
    async with unit_of_work(engine) as db:
        for org_role in ORG_ROLES:
            await create_api_key(db, org_id=acme.id, role=org_role)
    assert await key_count(engine) == 1 + len(ORG_ROLES)


async def test_there_is_at_most_one_operator_org(engine: AsyncEngine) -> None:
    async with unit_of_work(engine) as db:
        assert await find_operator_org(db) is None
        ops = await create_org(db, name="Ops", operator=True)
        plain = await create_org(db, name="Acme")
    assert ops.is_operator and not plain.is_operator
    with pytest.raises(Conflict, match="'Ops' is the operator already"):
        async with unit_of_work(engine) as db:
            await create_org(db, name="Rival", operator=True)
    async with unit_of_work(engine) as db:
        found = await find_operator_org(db)
        names = set((await db.execute(select(Organisation.name))).scalars())
    assert found is not None and found.id == ops.id
    assert names == {"Ops", "Acme"}


async def insert_legacy_key(db: AsyncSession, *, org_id: uuid.UUID, role: str) -> tuple[str, str]:
    """An API key row written directly, as ``create_api_key`` did before platform roles
    were confined to the operator organisation; returns its id and the plain key."""
    key = generate_api_key()
    row = ApiKey(org_id=org_id, role=role, key_hash=hash_api_key(key), prefix=display_prefix(key))
    db.add(row)
    await db.flush()
    return str(row.id), key


@pytest.mark.parametrize("role", sorted(PLATFORM_ROLES))
async def test_a_legacy_platform_key_of_another_org_gets_no_token(
    world_db: tuple[str, World],
    api: tuple[httpx.AsyncClient, World, FastAPI],
    role: Role,
    caplog: pytest.LogCaptureFixture,
) -> None:
    db_url, world = world_db
    client, _, _ = api
    async with database_session(db_url) as db:
        legacy_id, legacy = await insert_legacy_key(db, org_id=world.b.id, role=role.value)
        _, on_operator = await insert_legacy_key(db, org_id=world.a.id, role=role.value)

    with caplog.at_level(logging.WARNING, logger="server.auth.key_check"):
        refused = await client.post("/v1/auth/token", json={"api_key": legacy})
    assert refused.status_code == 401, refused.text
    assert refused.json()["detail"] == "invalid API key"
    assert "access_token" not in refused.text
    assert legacy_id in caplog.text and "not the operator" in caplog.text
    assert legacy not in caplog.text
    # the same role in the operator organisation, and B's organisation-role keys, still work
    who = (await client.get("/v1/whoami", headers=await login(client, on_operator))).json()
    assert (who["role"], who["org_id"]) == (role.value, str(world.a.id))
    assert (
        await client.get("/v1/whoami", headers=await login(client, world.b.keys["evaluator"]))
    ).status_code == 200


async def test_cli_refuses_a_platform_key_outside_the_operator_org_and_warns_inside_it(
    fresh_db_url: str, run_sync: Callable[..., Awaitable[object]]
) -> None:
    async def admin(*args: str) -> subprocess.CompletedProcess[str]:
        result = await run_sync(lambda: proctor_db(fresh_db_url, "admin", *args, check=False))
        assert isinstance(result, subprocess.CompletedProcess)
        return result

    assert (await admin("create-org", "Acme")).returncode == 0
    refused = await admin("create-key", "--org", "Acme", "--role", "admin")
    assert refused.returncode == 1, refused.stderr
    assert "'admin' is a platform role" in refused.stderr
    assert "create-org NAME --operator" in refused.stderr
    assert "pk_" not in refused.stdout

    assert (await admin("create-org", "Ops", "--operator")).returncode == 0
    still = await admin("create-key", "--org", "Acme", "--role", "auditor")
    assert still.returncode == 1 and "the operator organisation is 'Ops'" in still.stderr
    rival = await admin("create-org", "Rival", "--operator")
    assert rival.returncode == 1 and "'Ops' is the operator already" in rival.stderr
    # --exist-ok --operator never promotes an existing organisation; it accepts the operator
    promote = await admin("create-org", "Acme", "--exist-ok", "--operator")
    assert promote.returncode == 1 and "'Acme' exists and is not the operator" in promote.stderr
    assert (await admin("create-org", "Ops", "--exist-ok", "--operator")).returncode == 0

    made = await admin("create-key", "--org", "Ops", "--role", "admin")
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip().startswith("pk_") and "\n" not in made.stdout.strip()
    assert "acts on every organisation" in made.stderr and "pk_" not in made.stderr
    plain = await admin("create-key", "--org", "Acme", "--role", "vendor")
    assert plain.returncode == 0 and "every organisation" not in plain.stderr
