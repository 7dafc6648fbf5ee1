"""The Ed25519 key that signs checkpoints and exported bundles, and checking signatures.

The key comes from ``PROCTOR_AUDIT_SIGNING_KEY`` (base64 of the 32-byte raw private key,
or a PKCS#8 PEM), else the file ``PROCTOR_AUDIT_SIGNING_KEY_FILE`` (same formats; refused
if group or others may read it), else ``<data_dir>/audit-signing-key``, generated with mode
0600 on first use. Replicas that share one key sign alike; each key is named by its
``key_id`` (the first 16 bytes of the SHA-256 of the raw public key, hex), which every
checkpoint and bundle records, and an auditor pins the public keys they trust.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from server.config import Settings
from server.errors import InvalidInput
from server.key_files import KeyFileError, create_owner_only, read_owner_only

KEY_FILE = "audit-signing-key"
"""The generated key's file in the data directory."""
RAW = serialization.Encoding.Raw
RAW_PUBLIC = serialization.PublicFormat.Raw


class SigningKeyError(RuntimeError):
    """The configured signing key is missing, unreadable or malformed; says what to fix."""


@dataclass(frozen=True, slots=True)
class PublicKey:
    """A public key that verifies signatures, and its id."""

    key: Ed25519PublicKey

    @property
    def raw_b64(self) -> str:
        return base64.b64encode(self.key.public_bytes(RAW, RAW_PUBLIC)).decode()

    @property
    def key_id(self) -> str:
        return key_id(self.key)

    def verifies(self, signature_hex: str, payload: bytes) -> bool:
        """Whether ``signature_hex`` is this key's signature of ``payload``."""
        try:
            self.key.verify(bytes.fromhex(signature_hex), payload)
        except (InvalidSignature, ValueError):
            return False
        return True


@dataclass(frozen=True, slots=True)
class SigningKey:
    """The private key and the public key that goes with it."""

    key: Ed25519PrivateKey

    @property
    def public(self) -> PublicKey:
        return PublicKey(self.key.public_key())

    def sign(self, payload: bytes) -> str:
        """The Ed25519 signature of ``payload`` (hex)."""
        return self.key.sign(payload).hex()


def key_id(key: Ed25519PublicKey) -> str:
    """The name of a public key: the first 16 bytes of SHA-256 of its raw bytes (hex)."""
    return hashlib.sha256(key.public_bytes(RAW, RAW_PUBLIC)).hexdigest()[:32]


def parse_private(text: str, *, source: str) -> SigningKey:
    """A private key from base64 of its 32 raw bytes, or a PKCS#8 PEM; ``SigningKeyError``
    naming ``source`` otherwise."""
    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_private_key(text.encode(), password=None)
            if not isinstance(key, Ed25519PrivateKey):
                raise SigningKeyError(f"{source}: not an Ed25519 private key")
            return SigningKey(key)
        raw = base64.b64decode(text, validate=True)
        if len(raw) != 32:
            raise SigningKeyError(f"{source}: a raw key is 32 bytes, got {len(raw)}")
        return SigningKey(Ed25519PrivateKey.from_private_bytes(raw))
    except (ValueError, TypeError, binascii.Error) as error:
        raise SigningKeyError(f"{source}: not a key ({type(error).__name__})") from None


def parse_public(text: str, *, source: str) -> PublicKey:
    """A public key from base64 of its 32 raw bytes, or a PEM; ``InvalidInput`` otherwise."""
    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_public_key(text.encode())
            if not isinstance(key, Ed25519PublicKey):
                raise InvalidInput(f"{source}: not an Ed25519 public key")
            return PublicKey(key)
        raw = base64.b64decode(text, validate=True)
        return PublicKey(Ed25519PublicKey.from_public_bytes(raw))
    except (ValueError, TypeError, binascii.Error) as error:
        raise InvalidInput(f"{source}: not a public key ({type(error).__name__})") from None


def new_private_text() -> str:
    """A fresh private key, base64 of its raw bytes (what ``PROCTOR_AUDIT_SIGNING_KEY``
    takes)."""
    raw = Ed25519PrivateKey.generate().private_bytes(
        RAW, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return base64.b64encode(raw).decode()


@overload
def load_signing_key(settings: Settings, *, generate: Literal[True] = True) -> SigningKey: ...


@overload
def load_signing_key(settings: Settings, *, generate: bool) -> SigningKey | None: ...


def load_signing_key(settings: Settings, *, generate: bool = True) -> SigningKey | None:
    """The signing key ``settings`` name (see the module docstring); ``SigningKeyError`` if
    the configured one is missing, unreadable or malformed. With ``generate=False`` (a
    verifier's machine) no key file is created: None when no key is configured and
    ``<data_dir>/audit-signing-key`` does not exist."""
    if (secret := _configured_secret(settings)) is not None:
        return parse_private(secret, source="PROCTOR_AUDIT_SIGNING_KEY")
    if (path := _configured_file(settings)) is not None:
        return parse_private(_read_private_file(path), source=str(path))
    generated = settings.data_dir / KEY_FILE
    if not generate and not generated.exists():
        return None
    return parse_private(_read_private_file(_generated(settings.data_dir)), source=KEY_FILE)


def shared_key_warning(settings: Settings) -> str | None:
    """A warning when the server would sign with a key generated in its data directory
    on a database server (not the embedded SQLite file), where replicas and workers on
    other hosts would each generate their own (verifiers then trust only one of them);
    None otherwise."""
    if _configured_secret(settings) or _configured_file(settings) or settings.is_embedded:
        return None
    return (
        f"audit: checkpoints are signed with the key generated in {settings.data_dir / KEY_FILE};"
        " with replicas or workers on other hosts, give them all one key "
        "(PROCTOR_AUDIT_SIGNING_KEY or PROCTOR_AUDIT_SIGNING_KEY_FILE)"
    )


def _configured_secret(settings: Settings) -> str | None:
    secret = settings.audit_signing_key
    if secret is not None and secret.get_secret_value().strip():
        return secret.get_secret_value()
    return None


def _configured_file(settings: Settings) -> Path | None:
    path = settings.audit_signing_key_file
    return path if path is not None and str(path).strip() not in ("", ".") else None


def _read_private_file(path: Path) -> str:
    try:
        return read_owner_only(path)
    except KeyFileError as error:
        raise SigningKeyError(str(error)) from None


def _generated(data_dir: Path) -> Path:
    """``<data_dir>/audit-signing-key``, created with a fresh key and mode 0600 if missing
    (``server.key_files.create_owner_only``: the first process wins)."""
    path = data_dir / KEY_FILE
    create_owner_only(path, lambda: new_private_text() + "\n")
    return path
