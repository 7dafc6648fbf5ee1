"""API keys: generation and hashing (pure).

Keys are 256 random bits, so a single SHA-256 is enough to store them safely: there is no
dictionary to attack, and a slow password hash (bcrypt, argon2) would only add ~100 ms to
every token exchange without adding security.
"""

from __future__ import annotations

import hashlib
import secrets

KEY_PREFIX = "pk_"
KEY_BYTES = 32
MAX_KEY_LENGTH = 128


def generate_api_key() -> str:
    """A new key, ``pk_`` followed by 43 URL-safe characters (256 bits)."""
    return KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES)


def hash_api_key(key: str) -> str:
    """The stored form of ``key``: hex SHA-256."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def display_prefix(key: str) -> str:
    """The first characters of ``key``, enough to recognise it in a listing."""
    return key[:10]
