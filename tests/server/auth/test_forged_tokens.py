"""Forged and malformed bearer tokens: every one is a 401 problem, never a 5xx.

Each case builds a token from a context holding a real organisation, a real API key id
and a real server-issued token, then sends it to two protected routes. Signed tokens use
the test secret (``JWT_SECRET``); raw ones are assembled by hand (base64url + HMAC) so the
header and payload can be anything at all. A control case checks that a correctly built
token is accepted, so that a server refusing everything would fail this module.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import inspect
import json
import math
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.api import JWT_SECRET, World, login, open_session, running_api, seed_world
from tests.support.api import test_settings as make_settings
from tests.support.database import make_database_url
from tests.support.services import RedisServer

ISSUER = "proctor"
AUDIENCE = "proctor-api"
MAX_AGE_S = 3600  # Settings.token_max_age_s default
LEEWAY_S = 5
OTHER_SECRET = "another-secret-" + "Rk3Jw8Hq1Xz5Cv7N" * 3
MISSING = object()
"""A claim value meaning "leave this claim out"."""


@dataclass
class Ctx:
    """What the token builders need: a real org, key and token, and a client to revoke."""

    client: httpx.AsyncClient
    world: World
    admin: dict[str, str]
    org_id: uuid.UUID
    key_id: str
    valid_token: str
    session_id: str


# --------------------------------------------------------------------------- #
# Token building
# --------------------------------------------------------------------------- #


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def segment(value: Any) -> str:
    """A base64url segment: raw bytes as they are, anything else as JSON."""
    if isinstance(value, bytes):
        return b64url(value)
    return b64url(json.dumps(value, separators=(",", ":")).encode())


def hs256(signing_input: str, key: bytes | str = JWT_SECRET) -> str:
    raw_key = key.encode() if isinstance(key, str) else key
    return b64url(hmac.new(raw_key, signing_input.encode(), hashlib.sha256).digest())


def raw(
    payload: Any,
    header: Any = None,
    *,
    key: bytes | str = JWT_SECRET,
    signature: str | None = None,
) -> str:
    """``header.payload.signature`` built by hand; HMAC-SHA256 unless ``signature`` given."""
    if header is None:
        header = {"alg": "HS256", "typ": "at+jwt"}
    signing_input = f"{segment(header)}.{segment(payload)}"
    return f"{signing_input}.{hs256(signing_input, key) if signature is None else signature}"


def claims(ctx: Ctx, **changes: Any) -> dict[str, Any]:
    """Valid claims of an evaluator of org A; ``changes`` override (``MISSING`` removes)."""
    now = int(time.time())
    values: dict[str, Any] = {
        "sub": ctx.key_id,
        "org": str(ctx.org_id),
        "role": "evaluator",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now,
        "nbf": now,
        "exp": now + 600,
        "jti": secrets.token_hex(16),
    }
    values.update(changes)
    return {k: v for k, v in values.items() if v is not MISSING}


def signed(ctx: Ctx, **changes: Any) -> str:
    """A raw HS256 token of ``claims(ctx, **changes)`` signed with the server's secret."""
    return raw(claims(ctx, **changes))


def encoded(ctx: Ctx, *, algorithm: str = "HS256", key: str = JWT_SECRET, **headers: Any) -> str:
    """A token from PyJWT with valid claims."""
    return jwt.encode(claims(ctx), key, algorithm=algorithm, headers={"typ": "at+jwt", **headers})


def parts(token: str) -> tuple[str, str, str]:
    header, payload, signature = token.split(".")
    return header, payload, signature


def decoded_payload(token: str) -> dict[str, Any]:
    result: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return result


def rsa_public_pem() -> bytes:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def nested_list(depth: int) -> str:
    return "[" * depth + "]" * depth


def tampered_role(ctx: Ctx) -> str:
    header, _, signature = parts(ctx.valid_token)
    payload = {**decoded_payload(ctx.valid_token), "role": "admin"}
    return f"{header}.{segment(payload)}.{signature}"


def tampered_org(ctx: Ctx) -> str:
    header, _, signature = parts(ctx.valid_token)
    payload = {**decoded_payload(ctx.valid_token), "org": str(ctx.world.b.id)}
    return f"{header}.{segment(payload)}.{signature}"


def deeply_nested(depth: int) -> Callable[[Ctx], str]:
    """A correctly signed token whose payload is ``depth`` nested lists (raw JSON)."""

    def build(ctx: Ctx) -> str:
        header = segment({"alg": "HS256", "typ": "at+jwt"})
        body = b64url(nested_list(depth).encode())
        return f"{header}.{body}.{hs256(f'{header}.{body}')}"

    return build


def nested_in_claim(ctx: Ctx) -> str:
    """Signed, under the size limit, with a claim nested deeper than the recursion limit."""
    header = segment({"alg": "HS256", "typ": "at+jwt"})
    text = json.dumps(claims(ctx), separators=(",", ":"))[:-1] + ',"x":' + nested_list(1200) + "}"
    body = b64url(text.encode())
    token = f"{header}.{body}.{hs256(f'{header}.{body}')}"
    assert len(token) <= 4096
    return token


def nested_sub(ctx: Ctx) -> str:
    """Signed; ``sub`` is nested lists shallow enough for ``json`` to parse."""
    header = segment({"alg": "HS256", "typ": "at+jwt"})
    text = json.dumps(claims(ctx, sub="@"), separators=(",", ":")).replace('"@"', nested_list(500))
    body = b64url(text.encode())
    return f"{header}.{body}.{hs256(f'{header}.{body}')}"


async def revoked_jti(ctx: Ctx) -> str:
    headers = await login(ctx.client, ctx.world.a.keys["evaluator"])
    token = headers["Authorization"].removeprefix("Bearer ")
    assert (await ctx.client.get("/v1/whoami", headers=headers)).status_code == 200
    jti = decoded_payload(token)["jti"]
    revoked = await ctx.client.post("/v1/admin/tokens/revoke", json={"jti": jti}, headers=ctx.admin)
    assert revoked.status_code == 200 and revoked.json() == {"revoked": True}, revoked.text
    return token


async def revoked_key(ctx: Ctx) -> str:
    headers = await login(ctx.client, ctx.world.b.keys["vendor"])
    token = headers["Authorization"].removeprefix("Bearer ")
    assert (await ctx.client.get("/v1/whoami", headers=headers)).status_code == 200
    key_id = decoded_payload(token)["sub"]
    revoked = await ctx.client.post(
        "/v1/admin/tokens/revoke", json={"key_id": key_id}, headers=ctx.admin
    )
    assert revoked.status_code == 200, revoked.text
    return token


def _now() -> int:
    return int(time.time())


Builder = Callable[[Ctx], "str | Awaitable[str]"]


# (id, builder, authorization scheme)
CASES: list[Any] = [
    # --- algorithm confusion ---
    pytest.param(
        lambda c: raw(claims(c), {"alg": "none", "typ": "at+jwt"}, signature=""),
        id="alg-none-unsigned",
    ),
    pytest.param(lambda c: raw(claims(c), {"alg": "none", "typ": "at+jwt"}), id="alg-none-signed"),
    pytest.param(
        lambda c: raw(claims(c), {"alg": "None", "typ": "at+jwt"}, signature=""),
        id="alg-None-capitalised",
    ),
    pytest.param(lambda c: raw(claims(c), {"typ": "at+jwt"}), id="alg-missing"),
    pytest.param(lambda c: encoded(c, algorithm="HS384"), id="alg-hs384"),
    pytest.param(
        lambda c: encoded(c, algorithm="HS512"),
        id="alg-hs512",
        marks=pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning"),
    ),
    pytest.param(
        lambda c: raw(claims(c), {"alg": "RS256", "typ": "at+jwt"}), id="rs256-header-hs-body"
    ),
    pytest.param(
        lambda c: raw(claims(c), {"alg": "EdDSA", "typ": "at+jwt"}), id="eddsa-header-hs-body"
    ),
    pytest.param(lambda c: raw(claims(c), key=OTHER_SECRET), id="wrong-hmac-key"),
    pytest.param(lambda c: raw(claims(c), key=JWT_SECRET[:-1]), id="secret-prefix-key"),
    pytest.param(lambda c: raw(claims(c), key=rsa_public_pem()), id="hs256-with-rsa-public-pem"),
    # --- tampering with a real token ---
    pytest.param(tampered_role, id="tampered-role-admin"),
    pytest.param(tampered_org, id="tampered-org"),
    pytest.param(lambda c: c.valid_token.rsplit(".", 1)[0] + ".", id="stripped-signature"),
    pytest.param(lambda c: c.valid_token.rsplit(".", 1)[0], id="two-segments"),
    pytest.param(
        lambda c: c.valid_token[:-4] + ("AAAA" if not c.valid_token.endswith("AAAA") else "BBBB"),
        id="signature-altered",
    ),
    pytest.param(lambda c: c.valid_token + ".AAAA", id="four-segments"),
    pytest.param(lambda c: c.valid_token + ".a.b", id="five-segments-jwe-like"),
    pytest.param(lambda c: c.valid_token + " junk", id="trailing-junk-after-space"),
    # --- time claims ---
    pytest.param(
        lambda c: signed(c, iat=_now() - 900, nbf=_now() - 900, exp=_now() - 60), id="expired"
    ),
    pytest.param(lambda c: signed(c, nbf=_now() + 600), id="future-nbf"),
    pytest.param(lambda c: signed(c, iat=_now() + 600), id="future-iat"),
    pytest.param(
        lambda c: signed(
            c, iat=_now() - MAX_AGE_S - LEEWAY_S - 60, nbf=_now() - MAX_AGE_S - 60, exp=_now() + 600
        ),
        id="older-than-max-age",
    ),
    pytest.param(lambda c: signed(c, exp=[_now() + 600]), id="exp-list"),
    pytest.param(lambda c: signed(c, exp=str(_now() + 600)), id="exp-string"),
    pytest.param(lambda c: signed(c, exp=math.nan), id="exp-nan"),
    pytest.param(lambda c: signed(c, exp=math.inf), id="exp-infinity"),
    pytest.param(lambda c: signed(c, exp=_now() + 600.5), id="exp-float"),
    pytest.param(lambda c: signed(c, exp=True), id="exp-bool"),
    pytest.param(lambda c: signed(c, exp=None), id="exp-null"),
    pytest.param(lambda c: signed(c, exp={"t": _now() + 600}), id="exp-object"),
    pytest.param(lambda c: signed(c, exp=-(10**30)), id="exp-huge-negative"),
    pytest.param(lambda c: signed(c, exp=10**12), id="exp-year-33658"),
    pytest.param(lambda c: signed(c, exp=10**20), id="exp-1e20"),
    pytest.param(lambda c: signed(c, exp=_now() + 30 * 86_400), id="exp-beyond-policy-lifetime"),
    pytest.param(lambda c: signed(c, sub=str(uuid.uuid4())), id="sub-of-no-existing-key"),
    pytest.param(lambda c: signed(c, iat=str(_now())), id="iat-string"),
    pytest.param(lambda c: signed(c, iat=float(_now())), id="iat-float"),
    pytest.param(lambda c: signed(c, nbf=[_now()]), id="nbf-list"),
    pytest.param(lambda c: signed(c, nbf=math.nan), id="nbf-nan"),
    pytest.param(lambda c: signed(c, iat=-(10**30), nbf=-(10**30)), id="iat-huge-negative"),
    # --- issuer and audience ---
    pytest.param(lambda c: signed(c, iss="evil"), id="wrong-iss"),
    pytest.param(lambda c: signed(c, iss="proc"), id="iss-substring"),
    pytest.param(lambda c: signed(c, iss=[ISSUER]), id="iss-list"),
    pytest.param(lambda c: signed(c, aud="other-api"), id="wrong-aud"),
    pytest.param(lambda c: signed(c, aud="proctor"), id="aud-substring"),
    pytest.param(lambda c: signed(c, aud=[AUDIENCE]), id="aud-list"),
    pytest.param(lambda c: signed(c, aud=[AUDIENCE, "other"]), id="aud-list-two"),
    # --- missing claims ---
    *[
        pytest.param(lambda c, name=name: signed(c, **{name: MISSING}), id=f"missing-{name}")
        for name in ("sub", "org", "role", "iss", "aud", "iat", "nbf", "exp", "jti")
    ],
    # --- claim values ---
    pytest.param(lambda c: signed(c, jti="not-a-hex-jti"), id="jti-not-hex"),
    pytest.param(lambda c: signed(c, jti=secrets.token_hex(16).upper()), id="jti-uppercase"),
    pytest.param(lambda c: signed(c, jti=secrets.token_hex(16)[:31]), id="jti-31-chars"),
    pytest.param(lambda c: signed(c, jti=int("1" * 32)), id="jti-number"),
    pytest.param(lambda c: signed(c, role="superuser"), id="role-unknown"),
    pytest.param(lambda c: signed(c, role="Admin"), id="role-capitalised"),
    pytest.param(lambda c: signed(c, role=["admin"]), id="role-list"),
    pytest.param(lambda c: signed(c, org="not-a-uuid"), id="org-not-uuid"),
    pytest.param(lambda c: signed(c, sub="not-a-key-id"), id="sub-not-uuid"),
    pytest.param(lambda c: signed(c, sub=""), id="sub-empty"),
    pytest.param(lambda c: signed(c, sub="x" * 65), id="sub-too-long"),
    pytest.param(lambda c: signed(c, sid="not-a-uuid"), id="sid-not-uuid"),
    pytest.param(lambda c: signed(c, scope="admin"), id="extra-claim"),
    pytest.param(nested_sub, id="sub-nested-lists"),
    # --- header ---
    pytest.param(lambda c: raw(claims(c), {"alg": "HS256"}), id="typ-missing"),
    pytest.param(lambda c: raw(claims(c), {"alg": "HS256", "typ": "JWT"}), id="typ-jwt"),
    pytest.param(lambda c: raw(claims(c), {"alg": "HS256", "typ": "at+jwt-x"}), id="typ-suffix"),
    pytest.param(lambda c: raw(claims(c), {"alg": "HS256", "typ": ["at+jwt"]}), id="typ-list"),
    pytest.param(
        lambda c: raw(claims(c), {"alg": "HS256", "typ": "at+jwt", "crit": ["exp"]}),
        id="crit-header",
    ),
    pytest.param(lambda c: raw(claims(c), ["HS256", "at+jwt"]), id="header-json-array"),
    pytest.param(lambda c: raw(claims(c), b"not json"), id="header-not-json"),
    # --- payload shape ---
    pytest.param(lambda c: raw([claims(c)]), id="payload-json-array"),
    pytest.param(lambda c: raw("claims"), id="payload-json-string"),
    pytest.param(lambda c: raw(42), id="payload-json-number"),
    pytest.param(lambda c: raw(None), id="payload-json-null"),
    pytest.param(lambda c: raw(b"\xff\xfe not utf-8"), id="payload-not-utf8"),
    pytest.param(lambda c: raw(b'{"sub": '), id="payload-truncated-json"),
    pytest.param(deeply_nested(10_000), id="nested-10k-lists"),
    pytest.param(deeply_nested(1_200), id="nested-1200-lists"),
    pytest.param(nested_in_claim, id="nested-lists-in-claim"),
    # --- size and syntax ---
    pytest.param(lambda c: encoded(c, kid="k" * 4096), id="oversized-validly-signed"),
    pytest.param(lambda c: "A" * 100_000, id="oversized-garbage"),
    pytest.param(lambda c: "!!!not-base64!!!.@@@.###", id="non-base64-garbage"),
    pytest.param(lambda c: "not a token at all", id="words"),
    pytest.param(lambda c: "", id="empty-string"),
    pytest.param(lambda c: ".", id="one-dot"),
    pytest.param(lambda c: "..", id="only-dots"),
    pytest.param(lambda c: "....", id="four-dots"),
    pytest.param(lambda c: "e30.e30.", id="empty-objects"),
    # --- revocation ---
    pytest.param(revoked_jti, id="revoked-jti"),
    pytest.param(revoked_key, id="revoked-api-key"),
]


# --------------------------------------------------------------------------- #
# Fixtures
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
async def forge(
    backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Ctx]:
    """One seeded database and running app for the whole module (per backend), with a
    client that turns unhandled server errors into 500 responses instead of raising."""
    directory: Path = tmp_path_factory.mktemp("forged")
    db_url = await make_database_url(backend, request, directory)
    world = await seed_world(db_url)
    redis_url = None
    if backend == "postgres":
        redis: RedisServer = request.getfixturevalue("redis_server")
        redis_url = redis.url
    async with running_api(make_settings(db_url, redis_url)) as (app, setup_client):
        transport = httpx.ASGITransport(
            app=app, raise_app_exceptions=False, client=("127.0.0.1", 50001)
        )
        async with httpx.AsyncClient(transport=transport, base_url="http://proctor.test") as client:
            admin = await login(setup_client, world.a.keys["admin"])
            evaluator = await login(setup_client, world.a.keys["evaluator"])
            session = await open_session(setup_client, evaluator, world.a.model_id, n_items=3)
            token = evaluator["Authorization"].removeprefix("Bearer ")
            yield Ctx(
                client=client,
                world=world,
                admin=admin,
                org_id=world.a.id,
                key_id=decoded_payload(token)["sub"],
                valid_token=token,
                session_id=session["id"],
            )


async def build(builder: Builder, ctx: Ctx) -> str:
    token = builder(ctx)
    if inspect.isawaitable(token):
        token = await token
    assert isinstance(token, str)
    return token


def routes(ctx: Ctx) -> list[str]:
    return [
        "/v1/whoami",
        f"/v1/sessions/{ctx.session_id}/next",
        f"/v1/sessions/{uuid.uuid4()}/next",
    ]


def assert_unauthorized(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text)
    assert response.status_code == 401, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers.get("www-authenticate") == "Bearer"
    body = response.json()
    assert body["status"] == 401 and body["title"] == "Unauthorized"


# --------------------------------------------------------------------------- #
# Tests
# --------------------------------------------------------------------------- #


def test_enough_distinct_cases() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 30


async def test_control_token_is_accepted(forge: Ctx) -> None:
    """A correctly built token (signed here, not by the server) is accepted: the forged
    cases below fail for what is wrong with them, not because nothing is accepted."""
    for token in (forge.valid_token, signed(forge), encoded(forge)):
        headers = {"Authorization": f"Bearer {token}"}
        whoami = await forge.client.get("/v1/whoami", headers=headers)
        assert whoami.status_code == 200, whoami.text
        assert whoami.json()["org_id"] == str(forge.org_id)
        assert whoami.json()["role"] == "evaluator"
    nxt = await forge.client.get(
        f"/v1/sessions/{forge.session_id}/next",
        headers={"Authorization": f"Bearer {forge.valid_token}"},
    )
    assert nxt.status_code == 200, nxt.text


@pytest.mark.parametrize("builder", CASES)
async def test_forged_bearer_token_is_refused(forge: Ctx, builder: Builder) -> None:
    token = await build(builder, forge)
    for path in routes(forge):
        response = await forge.client.get(path, headers={"Authorization": f"Bearer {token}"})
        assert_unauthorized(response)


@pytest.mark.parametrize(
    "header",
    [
        pytest.param(lambda t: f"Basic {t}", id="basic-scheme"),
        pytest.param(lambda t: t, id="no-scheme"),
        pytest.param(lambda t: f"Token {t}", id="token-scheme"),
        pytest.param(lambda t: f"Bearer{t}", id="no-space"),
        pytest.param(lambda t: "Bearer", id="scheme-only"),
        pytest.param(lambda t: "Bearer    ", id="scheme-and-spaces"),
        pytest.param(lambda t: "Basic " + b64url(b"admin:admin"), id="basic-credentials"),
    ],
)
async def test_valid_token_with_wrong_scheme_is_refused(
    forge: Ctx, header: Callable[[str], str]
) -> None:
    for path in routes(forge):
        response = await forge.client.get(
            path, headers={"Authorization": header(forge.valid_token)}
        )
        assert_unauthorized(response)


async def test_no_authorization_header_is_refused(forge: Ctx) -> None:
    for path in routes(forge):
        assert_unauthorized(await forge.client.get(path))
