"""Unit tests of ``server.auth.tokens`` (pure) and of the key configuration at start-up."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import stat
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from server.api.runtime import SECRET_FILE, signing_keys
from server.app import create_app
from server.auth.tokens import (
    MAX_TOKEN_LENGTH,
    InvalidToken,
    KeyConfigurationError,
    SigningKeys,
    TokenClaims,
    TokenCodec,
    TokenPolicy,
    check_secret,
)
from server.config import Settings
from tests.support.api import JWT_SECRET
from tests.support.api import test_settings as make_settings

POLICY = TokenPolicy(
    issuer="proctor", audience="proctor-api", ttl_s=900, max_age_s=3600, leeway_s=5
)
ORG = uuid.UUID("7d1f3c52-0a6e-4f1b-9a53-2b1c7c0e9d11")
KEY = "0f8e0c36-5d8b-4d0b-8f5e-7a6b1c2d3e4f"


def ago(seconds: float) -> datetime:
    """A moment ``seconds`` before now (negative: after). PyJWT checks ``exp``, ``nbf`` and
    ``iat`` against the real clock whatever ``verify(now=...)`` says, so tests issue tokens
    relative to the real clock and verify them at the real time."""
    return datetime.now(UTC) - timedelta(seconds=seconds)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256_token(payload: dict[str, Any], key: bytes, header: dict[str, Any] | None = None) -> str:
    """An HS256 token built by hand (PyJWT refuses a PEM as an HMAC key)."""
    head = b64url(json.dumps(header or {"alg": "HS256", "typ": "at+jwt"}).encode())
    body = b64url(json.dumps(payload).encode())
    signature = hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64url(signature)}"


@pytest.fixture
def codec() -> TokenCodec:
    return TokenCodec(SigningKeys.hmac(JWT_SECRET), POLICY)


# --------------------------------------------------------------------------- #
# Round trip and policy
# --------------------------------------------------------------------------- #


def test_round_trip(codec: TokenCodec) -> None:
    issued_at = ago(10)
    token, issued = codec.issue(subject=KEY, org_id=ORG, role="vendor", now=issued_at)
    verified = codec.verify(token)
    assert verified == issued
    assert (verified.sub, verified.org, verified.role, verified.sid) == (KEY, ORG, "vendor", None)
    assert (verified.iss, verified.aud) == ("proctor", "proctor-api")
    assert verified.iat == verified.nbf == int(issued_at.timestamp())
    assert verified.exp == verified.iat + POLICY.ttl_s
    assert len(verified.jti) == 32
    header = jwt.get_unverified_header(token)
    assert header == {"alg": "HS256", "typ": "at+jwt"}


def test_round_trip_with_session_scope(codec: TokenCodec) -> None:
    sid = uuid.uuid4()
    token, _ = codec.issue(subject=KEY, org_id=ORG, role="evaluator", session_id=sid, now=ago(0))
    assert codec.verify(token).sid == sid


def test_every_token_has_its_own_jti(codec: TokenCodec) -> None:
    jtis = {
        codec.issue(subject=KEY, org_id=ORG, role="admin", now=ago(0))[1].jti for _ in range(50)
    }
    assert len(jtis) == 50


def test_issue_refuses_an_unknown_role(codec: TokenCodec) -> None:
    with pytest.raises(ValueError):
        codec.issue(subject=KEY, org_id=ORG, role="root", now=ago(0))


@pytest.mark.parametrize(
    ("age_s", "accepted"),
    [
        pytest.param(-POLICY.leeway_s - 3, False, id="issued-in-the-future"),
        pytest.param(-POLICY.leeway_s + 2, True, id="future-within-leeway"),
        pytest.param(POLICY.ttl_s - 2, True, id="just-before-expiry"),
        pytest.param(POLICY.ttl_s + POLICY.leeway_s - 2, True, id="expired-within-leeway"),
        pytest.param(POLICY.ttl_s + POLICY.leeway_s + 2, False, id="expired-past-leeway"),
    ],
)
def test_time_window(codec: TokenCodec, age_s: int, accepted: bool) -> None:
    token, _ = codec.issue(subject=KEY, org_id=ORG, role="vendor", now=ago(age_s))
    if accepted:
        codec.verify(token)
    else:
        with pytest.raises(InvalidToken):
            codec.verify(token)


def test_maximum_age_wins_over_a_long_exp() -> None:
    long_lived = TokenCodec(
        SigningKeys.hmac(JWT_SECRET),
        TokenPolicy(
            issuer="proctor", audience="proctor-api", ttl_s=86_400, max_age_s=3600, leeway_s=5
        ),
    )
    fresh_enough, _ = long_lived.issue(subject=KEY, org_id=ORG, role="vendor", now=ago(3600))
    long_lived.verify(fresh_enough)
    too_old, _ = long_lived.issue(subject=KEY, org_id=ORG, role="vendor", now=ago(3600 + 8))
    with pytest.raises(InvalidToken, match="maximum token age"):
        long_lived.verify(too_old)


def test_other_issuer_or_audience_is_refused(codec: TokenCodec) -> None:
    token, _ = codec.issue(subject=KEY, org_id=ORG, role="vendor", now=ago(0))
    for policy in (
        TokenPolicy(issuer="other", audience="proctor-api", ttl_s=900, max_age_s=3600, leeway_s=5),
        TokenPolicy(issuer="proctor", audience="other", ttl_s=900, max_age_s=3600, leeway_s=5),
    ):
        with pytest.raises(InvalidToken):
            TokenCodec(SigningKeys.hmac(JWT_SECRET), policy).verify(token, now=ago(0))


def test_token_of_another_secret_is_refused(codec: TokenCodec) -> None:
    other = TokenCodec(SigningKeys.hmac(secrets.token_urlsafe(48)), POLICY)
    token, _ = other.issue(subject=KEY, org_id=ORG, role="admin", now=ago(0))
    with pytest.raises(InvalidToken):
        codec.verify(token, now=ago(0))


def test_oversized_token_is_refused_before_decoding(codec: TokenCodec) -> None:
    with pytest.raises(InvalidToken, match="oversized"):
        codec.verify("a" * (MAX_TOKEN_LENGTH + 1))
    with pytest.raises(InvalidToken, match="missing"):
        codec.verify("")


def test_claims_are_strict() -> None:
    valid: dict[str, Any] = {
        "sub": KEY,
        "org": str(ORG),
        "role": "vendor",
        "iss": "proctor",
        "aud": "proctor-api",
        "iat": 1,
        "nbf": 1,
        "exp": 2,
        "jti": "a" * 32,
    }
    TokenClaims.model_validate(valid)
    for change in ({"exp": "2"}, {"exp": 2.0}, {"exp": [2]}, {"extra": 1}, {"jti": "A" * 32}):
        with pytest.raises(ValueError):
            TokenClaims.model_validate({**valid, **change})


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.text(max_size=300),
        st.lists(st.text(alphabet="abcXYZ019-_=", max_size=60), min_size=1, max_size=6).map(
            ".".join
        ),
    )
)
def test_verify_raises_only_invalid_token(token: str) -> None:
    codec = TokenCodec(SigningKeys.hmac(JWT_SECRET), POLICY)
    with pytest.raises(InvalidToken):
        codec.verify(token)


# --------------------------------------------------------------------------- #
# Secrets
# --------------------------------------------------------------------------- #

WEAK_SECRETS = [
    pytest.param("changeme", id="changeme"),
    pytest.param("  ChangeMe  ", id="changeme-padded-capitalised"),
    pytest.param("secret", id="secret"),
    pytest.param("jwt-secret", id="jwt-secret"),
    pytest.param("", id="empty"),
    pytest.param("Ab3$" + "x7Qp2Lm9Zr4Tn8Vb" + "Kc5Wd1Hf6Gj", id="31-bytes"),
    pytest.param("a" * 64, id="one-character"),
    pytest.param("ab" * 32, id="two-characters"),
    pytest.param("abcdefg" * 10, id="seven-distinct-characters"),
]


@pytest.mark.parametrize("secret", WEAK_SECRETS)
def test_weak_secrets_are_refused(secret: str) -> None:
    with pytest.raises(KeyConfigurationError):
        check_secret(secret)
    with pytest.raises(KeyConfigurationError):
        SigningKeys.hmac(secret)


def test_the_31_byte_case_is_31_bytes() -> None:
    assert len(WEAK_SECRETS[5].values[0].encode()) == 31


def test_31_byte_secret_of_multibyte_characters_counts_bytes() -> None:
    check_secret("é" * 16 + "abcdefgh")  # 40 bytes, 24 characters, 9 distinct
    with pytest.raises(KeyConfigurationError):
        check_secret("é" * 11 + "abcdefghi")  # 31 bytes


@pytest.mark.parametrize(
    "secret",
    [
        pytest.param(JWT_SECRET, id="test-secret"),
        pytest.param(secrets.token_urlsafe(48), id="token-urlsafe-48"),
        pytest.param("Ab3$x7Qp2Lm9Zr4Tn8VbKc5Wd1Hf6Gj0", id="exactly-32-bytes"),
    ],
)
def test_strong_secrets_are_accepted(secret: str) -> None:
    check_secret(secret)
    keys = SigningKeys.hmac(secret)
    assert keys.algorithm == "HS256" and keys.signing_key == keys.verification_key == secret


# --------------------------------------------------------------------------- #
# Asymmetric keys
# --------------------------------------------------------------------------- #


def private_key(algorithm: str) -> Any:
    if algorithm == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    if algorithm == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def write_key_pair(directory: Path, algorithm: str) -> tuple[Path, Path]:
    key = private_key(algorithm)
    private_file = directory / f"{algorithm}.key"
    public_file = directory / f"{algorithm}.pub"
    private_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public_file.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private_file, public_file


ASYMMETRIC = [pytest.param(a, id=a) for a in ("EdDSA", "RS256", "ES256")]


@pytest.mark.parametrize("algorithm", ASYMMETRIC)
def test_asymmetric_round_trip(tmp_path: Path, algorithm: str) -> None:
    private_file, public_file = write_key_pair(tmp_path, algorithm)
    codec = TokenCodec(SigningKeys.asymmetric(algorithm, private_file, public_file), POLICY)
    token, issued = codec.issue(subject=KEY, org_id=ORG, role="auditor", now=ago(0))
    assert jwt.get_unverified_header(token)["alg"] == algorithm
    assert codec.verify(token, now=ago(0)) == issued


@pytest.mark.parametrize("algorithm", ASYMMETRIC)
def test_hs256_signed_with_the_public_key_is_refused(tmp_path: Path, algorithm: str) -> None:
    private_file, public_file = write_key_pair(tmp_path, algorithm)
    codec = TokenCodec(SigningKeys.asymmetric(algorithm, private_file, public_file), POLICY)
    _, genuine = codec.issue(subject=KEY, org_id=ORG, role="vendor", now=ago(0))
    payload = {**genuine.model_dump(mode="json", exclude_none=True), "role": "admin"}
    public_pem = public_file.read_bytes()
    for key in (public_pem, public_pem.strip()):
        with pytest.raises(InvalidToken):
            codec.verify(hs256_token(payload, key), now=ago(0))
    # and the same token with the asymmetric algorithm's name in the header
    with pytest.raises(InvalidToken):
        codec.verify(
            hs256_token(payload, public_pem, {"alg": algorithm, "typ": "at+jwt"}), now=ago(0)
        )


@pytest.mark.parametrize("algorithm", ASYMMETRIC)
def test_token_of_another_key_pair_is_refused(tmp_path: Path, algorithm: str) -> None:
    mine = write_key_pair(tmp_path, algorithm)
    (tmp_path / "other").mkdir()
    theirs = write_key_pair(tmp_path / "other", algorithm)
    codec = TokenCodec(SigningKeys.asymmetric(algorithm, *mine), POLICY)
    forger = TokenCodec(SigningKeys.asymmetric(algorithm, *theirs), POLICY)
    token, _ = forger.issue(subject=KEY, org_id=ORG, role="admin", now=ago(0))
    with pytest.raises(InvalidToken):
        codec.verify(token, now=ago(0))


def test_hmac_codec_refuses_asymmetric_token(tmp_path: Path) -> None:
    signer = TokenCodec(SigningKeys.asymmetric("EdDSA", *write_key_pair(tmp_path, "EdDSA")), POLICY)
    token, _ = signer.issue(subject=KEY, org_id=ORG, role="admin", now=ago(0))
    with pytest.raises(InvalidToken):
        TokenCodec(SigningKeys.hmac(JWT_SECRET), POLICY).verify(token, now=ago(0))


@pytest.mark.parametrize("algorithm", ["HS256", "HS512", "none", "PS256"])
def test_asymmetric_refuses_other_algorithms(tmp_path: Path, algorithm: str) -> None:
    private_file, public_file = write_key_pair(tmp_path, "RS256")
    with pytest.raises(KeyConfigurationError):
        SigningKeys.asymmetric(algorithm, private_file, public_file)


# --------------------------------------------------------------------------- #
# Start-up configuration
# --------------------------------------------------------------------------- #


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'proctor.db'}"


@pytest.mark.parametrize(
    "secret",
    [
        pytest.param("short-secret-9Xq", id="short"),
        pytest.param("changeme", id="changeme"),
        pytest.param("z" * 48, id="low-entropy"),
    ],
)
def test_app_refuses_to_start_with_a_weak_secret(tmp_path: Path, secret: str) -> None:
    # refused as soon as the settings are read, before any app or command exists
    with pytest.raises(ValidationError, match="PROCTOR_JWT_SECRET"):
        make_settings(sqlite_url(tmp_path), jwt_secret=secret)


def test_postgres_without_a_secret_refuses() -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, database_url="postgresql+asyncpg://x/y", jwt_secret=None
    )
    assert not settings.is_embedded
    with pytest.raises(KeyConfigurationError, match="not set"):
        signing_keys(settings)


async def test_app_on_postgres_without_a_secret_refuses_to_start() -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, database_url="postgresql+asyncpg://x/y", jwt_secret=None
    )
    app = create_app(settings)
    with pytest.raises(KeyConfigurationError):
        async with app.router.lifespan_context(app):
            pytest.fail("the app started without a secret on PostgreSQL")


def test_asymmetric_algorithm_without_key_files_refuses(tmp_path: Path) -> None:
    settings = make_settings(sqlite_url(tmp_path), jwt_algorithm="EdDSA")
    with pytest.raises(KeyConfigurationError, match="KEY_FILE"):
        signing_keys(settings)


def test_asymmetric_settings_give_asymmetric_keys(tmp_path: Path) -> None:
    private_file, public_file = write_key_pair(tmp_path, "EdDSA")
    settings = make_settings(
        sqlite_url(tmp_path),
        jwt_algorithm="EdDSA",
        jwt_private_key_file=private_file,
        jwt_public_key_file=public_file,
    )
    keys = signing_keys(settings)
    assert keys.algorithm == "EdDSA"
    assert keys.verification_key == public_file.read_bytes()


def test_embedded_default_generates_a_private_strong_secret(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    settings = Settings(_env_file=None, data_dir=data_dir, database_url="", jwt_secret=None)  # type: ignore[call-arg]
    assert settings.is_embedded
    keys = signing_keys(settings)
    path = data_dir / SECRET_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    check_secret(keys.signing_key)
    assert signing_keys(settings).signing_key == keys.signing_key  # created once, then reused
