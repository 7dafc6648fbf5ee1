"""Roles, permissions and the principal a verified token stands for (pure, no I/O).

The role → permission table below is the one place access rules are written; every route
names the permission it needs (``server.auth.dependencies.require``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from clients.sdk.types import Role

__all__ = ["PLATFORM_ROLES", "ROLE_PERMISSIONS", "Permission", "Principal", "Role"]

PLATFORM_ROLES: frozenset[Role] = frozenset({Role.ADMIN, Role.AUDITOR, Role.REVIEWER})
"""Roles that act on (admin) or read (auditor) every organisation's data
(``Permission.ANY_ORG``), and reviewers, who score answers of every organisation in the
human review queue. Only keys of the operator's organisation
(``Organisation.is_operator``) may have one: ``create_api_key`` refuses them elsewhere and
``exchange_api_key`` refuses such keys made before that rule."""


class Permission(StrEnum):
    MODELS_READ = "models:read"
    MODELS_WRITE = "models:write"
    SESSIONS_READ = "sessions:read"
    SESSIONS_CREATE = "sessions:create"
    SESSIONS_SIZE = "sessions:size"
    """Choose ``n_items`` other than the default."""
    SESSIONS_CONTAMINATION = "sessions:contamination"
    """Open replay and anchor-set sessions (contamination checks)."""
    SESSIONS_DRIVE = "sessions:drive"
    """Take items and submit answers."""
    SESSIONS_ABORT = "sessions:abort"
    """Abort any organisation's session (``/v1/admin/sessions/{id}/abort``)."""
    SESSIONS_ABORT_OWN = "sessions:abort-own"
    """Abort a session of one's own organisation (a broken run must not hold the quota
    until its deadline)."""
    SESSIONS_LIST_ALL = "sessions:list-all"
    TOKENS_REVOKE = "tokens:revoke"
    AUDIT_READ = "audit:read"
    ANY_ORG = "orgs:any"
    """Act on (or, for read-only roles, read) every organisation's data."""
    SELF_READ = "self:read"
    LEADERBOARD_READ = "leaderboard:read"
    LEADERBOARD_FULL = "leaderboard:full"
    """See every leaderboard field, not only the configured public ones."""
    LEADERBOARD_ANCHOR = "leaderboard:anchor"
    """Designate the anchor model of relative scores."""
    SCORES_LIVE = "scores:live"
    """See figures that move with single verdicts (points, review counts, an adaptive
    estimate) while a session runs (``server.scoring.visibility``)."""
    SESSIONS_ADAPTIVE = "sessions:adaptive"
    """Open adaptive sessions: their item choice and stopping follow the verdicts so far, so
    whoever drives one learns from them; not for vendors."""
    BANK_HEALTH_READ = "bank:health-read"
    """Read the bank's health figures, item statuses and review history (not answers)."""
    BANK_REVIEW = "bank:review"
    """Review items: keep, retire, or edit and restore a flagged item; see its answer."""
    REVIEW_ANSWERS = "review:answers"
    """Work the human review queue: see its answers with their question, reference and the
    judge's reasoning, and score them (evaluators: their own organisation's sessions)."""
    JUDGE_READ = "judge:read"
    """Read the judges' calibrations, gate and drift status, and reviewer agreement."""
    JUDGE_MANAGE = "judge:manage"
    """Freeze calibration sets and run judges on them."""
    ORGS_READ = "orgs:read"
    """List organisations, their quotas and their keys (prefix, role, state; never a key)."""
    ORGS_MANAGE = "orgs:manage"
    """Create organisations, set their quotas, create and revoke API keys."""
    BANK_IMPORT = "bank:import"
    """Import items into the bank (all-or-nothing)."""


_OWN_ORG_WORK = frozenset(
    {
        Permission.SELF_READ,
        Permission.MODELS_READ,
        Permission.MODELS_WRITE,
        Permission.SESSIONS_READ,
        Permission.SESSIONS_CREATE,
        Permission.SESSIONS_DRIVE,
        Permission.SESSIONS_ABORT_OWN,
        Permission.LEADERBOARD_READ,
    }
)

ROLE_PERMISSIONS: dict[Role, frozenset[Permission]] = {
    Role.VENDOR: _OWN_ORG_WORK,
    Role.EVALUATOR: _OWN_ORG_WORK
    | {
        Permission.SESSIONS_SIZE,
        Permission.SESSIONS_CONTAMINATION,
        Permission.SESSIONS_ADAPTIVE,
        Permission.LEADERBOARD_FULL,
        Permission.REVIEW_ANSWERS,
    },
    Role.REVIEWER: frozenset({Permission.SELF_READ, Permission.REVIEW_ANSWERS}),
    Role.AUDITOR: frozenset(
        {
            Permission.SELF_READ,
            Permission.MODELS_READ,
            Permission.SESSIONS_READ,
            Permission.SESSIONS_LIST_ALL,
            Permission.AUDIT_READ,
            Permission.ANY_ORG,
            Permission.LEADERBOARD_READ,
            Permission.LEADERBOARD_FULL,
            Permission.SCORES_LIVE,
            Permission.BANK_HEALTH_READ,
            Permission.JUDGE_READ,
            Permission.ORGS_READ,
        }
    ),
    Role.ADMIN: frozenset(Permission),
}


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the API key (``subject``), its organisation and role, and the token."""

    subject: str
    org_id: uuid.UUID
    role: Role
    jti: str
    expires_at: datetime
    session_id: uuid.UUID | None = None
    """Set for a token scoped to one session: it may touch that session only."""

    def can(self, permission: Permission) -> bool:
        return permission in ROLE_PERMISSIONS[self.role]

    def sees_org(self, org_id: uuid.UUID) -> bool:
        """Whether data of ``org_id`` is visible to this principal."""
        return org_id == self.org_id or self.can(Permission.ANY_ORG)
