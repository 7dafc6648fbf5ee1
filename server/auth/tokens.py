"""Issuing and verifying access tokens (JWT, RFC 7519) following RFC 8725 (pure, no I/O).

* One algorithm only: HS256 with a server secret, or one asymmetric algorithm with a key
  pair; HMAC and public-key algorithms are never in the same allow-list, so a token
  "signed" with the public key as an HMAC secret is refused (RFC 8725 §2.1, §3.1).
* Explicit typing: the header must say ``typ: at+jwt`` (RFC 8725 §3.11, RFC 9068).
* Required claims, issuer and audience, expiry with a small leeway, ``nbf``/``iat`` not in
  the future, and a maximum age measured from ``iat`` whatever ``exp`` says.
* After PyJWT has checked the signature, the claims are validated by a strict schema
  (``TokenClaims``): a number that is a string, a list or NaN is refused, not coerced.
* Every failure, whatever its cause (including malformed JSON, deep nesting or absurd
  sizes), is an ``InvalidToken``; nothing else escapes ``verify``.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jwt
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from clients.sdk.types import Role

TOKEN_TYPE = "at+jwt"
MAX_TOKEN_LENGTH = 4096
MIN_SECRET_BYTES = 32
MAX_TIMESTAMP = 253_402_300_799
"""9999-12-31T23:59:59Z: the last instant ``datetime`` can represent."""
HMAC_ALGORITHMS = frozenset({"HS256"})
ASYMMETRIC_ALGORITHMS = frozenset({"RS256", "ES256", "EdDSA"})
REQUIRED_CLAIMS = ("sub", "org", "role", "iss", "aud", "iat", "nbf", "exp", "jti")
KNOWN_WEAK_SECRETS = frozenset(
    {"secret", "changeme", "changethis", "change-me", "proctor", "password", "jwt-secret"}
)


class InvalidToken(Exception):
    """The token is not acceptable; ``reason`` says why (for logs, not for the caller)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class KeyConfigurationError(Exception):
    """The signing configuration is unsafe or incomplete; the server must not start."""


API_KEY_ID = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
"""What a token's ``sub`` may be: an API key id as ``str(uuid.UUID)`` writes it."""


class TokenClaims(BaseModel):
    """The claims of a Proctor access token, validated strictly after decoding."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sub: StrictStr = Field(pattern=API_KEY_ID)
    """The API key's id (``str(uuid)``): nothing else, so no control character (a NUL
    once reached the audit insert) can stand for a subject."""
    org: uuid.UUID
    role: Role
    iss: StrictStr
    aud: StrictStr
    iat: StrictInt = Field(ge=0, le=MAX_TIMESTAMP)
    nbf: StrictInt = Field(ge=0, le=MAX_TIMESTAMP)
    exp: StrictInt = Field(ge=0, le=MAX_TIMESTAMP)
    jti: StrictStr = Field(pattern=r"^[0-9a-f]{32}$")
    sid: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class SigningKeys:
    """The single algorithm in use and its signing and verification keys."""

    algorithm: str
    signing_key: Any
    verification_key: Any

    @classmethod
    def hmac(cls, secret: str) -> SigningKeys:
        """HS256 keys from ``secret``; refuses a known default or one under 256 bits."""
        check_secret(secret)
        return cls("HS256", secret, secret)

    @classmethod
    def asymmetric(
        cls, algorithm: str, private_key_file: Path, public_key_file: Path
    ) -> SigningKeys:
        """Keys for ``algorithm`` (RS256, ES256 or EdDSA) from PEM files."""
        if algorithm not in ASYMMETRIC_ALGORITHMS:
            raise KeyConfigurationError(
                f"PROCTOR_JWT_ALGORITHM must be HS256 or one of {sorted(ASYMMETRIC_ALGORITHMS)},"
                f" got {algorithm!r}"
            )
        return cls(algorithm, private_key_file.read_bytes(), public_key_file.read_bytes())


def check_secret(secret: str) -> None:
    """Raise ``KeyConfigurationError`` unless ``secret`` is long and not a known default."""
    if secret.strip().lower() in KNOWN_WEAK_SECRETS:
        raise KeyConfigurationError("PROCTOR_JWT_SECRET is a well-known default; set a random one")
    if len(secret.encode()) < MIN_SECRET_BYTES:
        raise KeyConfigurationError(
            f"PROCTOR_JWT_SECRET must be at least {MIN_SECRET_BYTES} bytes (256 bits), "
            f"got {len(secret.encode())}; generate one with: "
            "python -c 'import secrets; print(secrets.token_urlsafe(48))'"
        )
    if len(set(secret)) < 8:
        raise KeyConfigurationError("PROCTOR_JWT_SECRET has too few distinct characters")


@dataclass(frozen=True, slots=True)
class TokenPolicy:
    """What a token must satisfy besides its signature."""

    issuer: str
    audience: str
    ttl_s: int
    max_age_s: int
    leeway_s: int


class TokenCodec:
    """Issues and verifies tokens with one ``SigningKeys`` and one ``TokenPolicy``."""

    def __init__(self, keys: SigningKeys, policy: TokenPolicy) -> None:
        self.keys = keys
        self.policy = policy

    def issue(
        self,
        *,
        subject: str,
        org_id: uuid.UUID,
        role: str,
        session_id: uuid.UUID | None = None,
        now: datetime | None = None,
        jti: str | None = None,
    ) -> tuple[str, TokenClaims]:
        """A signed token and its claims, valid for ``policy.ttl_s`` from ``now``; ``jti``
        (32 hex digits) for a token that must keep one id across issues (a run's slot
        holds its session's lease with it), else a random one."""
        issued = int((now or datetime.now(UTC)).timestamp())
        claims = TokenClaims(
            sub=subject,
            org=org_id,
            role=role,
            iss=self.policy.issuer,
            aud=self.policy.audience,
            iat=issued,
            nbf=issued,
            exp=issued + self.policy.ttl_s,
            jti=jti or secrets.token_hex(16),
            sid=session_id,
        )
        payload = claims.model_dump(mode="json", exclude_none=True)
        token = jwt.encode(
            payload,
            self.keys.signing_key,
            algorithm=self.keys.algorithm,
            headers={"typ": TOKEN_TYPE},
        )
        return token, claims

    def verify(self, token: str, *, now: datetime | None = None) -> TokenClaims:
        """The claims of ``token`` if it is acceptable in every respect, else ``InvalidToken``."""
        if not token or len(token) > MAX_TOKEN_LENGTH:
            raise InvalidToken("missing or oversized token")
        try:
            decoded = jwt.api_jwt.decode_complete(
                token,
                self.keys.verification_key,
                algorithms=[self.keys.algorithm],
                audience=self.policy.audience,
                issuer=self.policy.issuer,
                leeway=self.policy.leeway_s,
                # Times are checked by ``_check_times`` against ``now`` (one clock, one place).
                options={
                    "require": list(REQUIRED_CLAIMS),
                    "strict_aud": True,
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                },
            )
        except Exception as error:  # PyJWT raises more than PyJWTError on hostile input
            raise InvalidToken(f"{type(error).__name__}: {error}") from None
        if decoded["header"].get("typ") != TOKEN_TYPE:
            raise InvalidToken("wrong token type")
        try:
            claims = TokenClaims.model_validate(decoded["payload"])
        except (ValidationError, RecursionError) as error:
            raise InvalidToken(f"claims: {error}") from None
        self._check_times(claims, now or datetime.now(UTC))
        return claims

    def _check_times(self, claims: TokenClaims, now: datetime) -> None:
        current = now.timestamp()
        leeway = self.policy.leeway_s
        if claims.exp <= current - leeway:
            raise InvalidToken("expired")
        if claims.nbf > current + leeway or claims.iat > current + leeway:
            raise InvalidToken("not yet valid")
        if current - claims.iat > self.policy.max_age_s + leeway:
            raise InvalidToken("older than the maximum token age")
        if claims.exp - claims.iat > max(self.policy.ttl_s, self.policy.max_age_s) + leeway:
            raise InvalidToken("lifetime longer than the policy allows")
