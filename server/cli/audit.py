"""``proctor audit``: check the evaluation record (``docs/verification.md``).

The group's commands live in one module per concern, each adding its commands with
``add_commands(app)``: ``audit_chain`` (``verify``: the hash-chained audit log and results
ledger against their signed checkpoints), ``audit_sample`` (``sample``: re-derive a
session's sample from its seed) and ``audit_bundle`` (``export`` and ``check``: a signed
JSONL record of one session, checked offline).
"""

from __future__ import annotations

import typer

from server.cli import audit_bundle, audit_chain, audit_sample
from server.cli.groups import group

app = group(
    "audit",
    "Verify the record: audit chain, samples, session bundles.",
    "proctor audit verify",
    "proctor audit sample 3f2b9c1e-...",
    "proctor audit check session.jsonl --public-key audit.pub",
)
for module in (audit_chain, audit_sample, audit_bundle):
    module.add_commands(app)


def register(root: typer.Typer) -> None:
    root.add_typer(app)
