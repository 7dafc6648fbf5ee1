"""The signed checkpoints and the signing key as the API shows them."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from server.ledger.chain import Log


class CheckpointOut(BaseModel):
    """A signed checkpoint of one chain (``server.ledger.checkpoints``): save it, and pass
    it later to ``proctor audit verify --from FILE`` as a trusted anchor."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    log: Log
    chain: str
    last_row_id: int
    n_rows: int
    head_hash: str
    prev_checkpoint_hash: str | None
    checkpoint_hash: str
    """SHA-256 of the signed payload."""
    at: datetime
    key_id: str
    signature: str
    """Ed25519 signature of the payload (hex), by the key ``key_id`` names."""


class SigningKeyOut(BaseModel):
    """The public key that verifies checkpoints and session bundles."""

    key_id: str
    """The first 16 bytes of SHA-256 of the raw public key (hex)."""
    public_key: str
    """Base64 of the 32-byte raw Ed25519 public key (what ``--public-key`` files hold)."""
    algorithm: str = "Ed25519"
