"""Settings from the environment (prefix ``PROCTOR_``) via pydantic-settings."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_data_dir() -> Path:
    """Where the embedded default keeps its SQLite file: ``$XDG_DATA_HOME/proctor``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "proctor"


class JudgeEndpoint(BaseModel):
    """One LLM judge behind an OpenAI-compatible endpoint (an entry of ``PROCTOR_JUDGES``)."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._:@/-]+$")
    """Stable identity stored with every verdict: include the model snapshot, e.g.
    ``gpt-4o-2024-11-20``; a new snapshot is a new judge."""
    base_url: str
    """E.g. ``https://api.openai.com/v1``."""
    model: str
    api_key: SecretStr | None = None
    input_per_mtok: float = Field(0.0, ge=0)
    """Price per million prompt tokens (cost accounting)."""
    output_per_mtok: float = Field(0.0, ge=0)
    read_timeout_s: float = Field(60.0, gt=0)


LeaderboardField = Literal[
    "position",
    "group",
    "rank_range",
    "beats_next",
    "name",
    "family",
    "organisation",
    "absolute",
    "relative",
    "sessions",
    "disciplines",
    "latency",
    "cost",
    "contamination",
]
LEADERBOARD_FIELDS: tuple[str, ...] = get_args(LeaderboardField)
DEFAULT_PUBLIC_FIELDS: tuple[LeaderboardField, ...] = (
    "position",
    "group",
    "rank_range",
    "beats_next",
    "name",
    "family",
    "absolute",
    "relative",
    "sessions",
    "disciplines",
)


class Settings(BaseSettings):
    """Every ``PROCTOR_`` variable. See README "Configuration"."""

    model_config = SettingsConfigDict(env_prefix="PROCTOR_", env_file=".env", extra="ignore")

    data_dir: Path = Field(default_factory=default_data_dir)
    """Directory of the embedded SQLite database (``PROCTOR_DATA_DIR``)."""
    database_url: str = ""
    """SQLAlchemy async URL, e.g. ``postgresql+asyncpg://user:pw@host/db``;
    empty means the embedded default ``sqlite+aiosqlite:///<data_dir>/proctor.db``."""
    redis_url: str | None = None
    """``redis://host:port/db``; unset means in-process stand-ins (embedded default)."""

    # --- authentication (see server/auth/tokens.py) ---
    jwt_secret: SecretStr | None = None
    """HS256 signing secret, at least 32 bytes (``PROCTOR_JWT_SECRET``). Unset on the embedded
    default: a random one is generated into ``<data_dir>/jwt-secret``; unset with PostgreSQL:
    the server refuses to start."""
    jwt_algorithm: str = "HS256"
    """The one algorithm tokens are signed and verified with: HS256, or an asymmetric
    RS256 / ES256 / EdDSA with the two key files below (never mixed)."""
    jwt_private_key_file: Path | None = None
    jwt_public_key_file: Path | None = None
    jwt_issuer: str = "proctor"
    jwt_audience: str = "proctor-api"
    token_ttl_s: int = Field(900, ge=30, le=86_400)
    """Lifetime of an access token."""
    token_max_age_s: int = Field(3600, ge=30, le=86_400)
    """Tokens older than this (by ``iat``) are refused whatever their ``exp`` says."""
    token_leeway_s: int = Field(5, ge=0, le=60)
    """Clock skew tolerated on ``exp``, ``nbf`` and ``iat``."""

    # --- quotas and limits ---
    rate_limit_per_minute: int = Field(1200, ge=1)
    """Requests per token per minute; key exchanges per client address per minute use a
    tenth of it."""
    max_concurrent_sessions: int = Field(5, ge=1)
    """Open (created or active) sessions per organisation."""
    max_sessions_per_period: int = Field(50, ge=1)
    session_period_s: int = Field(86_400, ge=60)
    default_session_items: int = Field(1000, ge=1)
    max_session_items: int = Field(5000, ge=1)
    """Upper bound on ``n_items`` for admins and evaluators (vendors get the default)."""
    pending_window: int = Field(1, ge=1, le=100)
    """How many delivered-but-unanswered items a session may hold."""
    session_deadline_s: int = Field(7 * 86_400, ge=10)
    """Time from creation after which an unfinished session expires."""
    lease_idle_s: float = Field(60.0, gt=0)
    """A session driven by one token is refused to others until it has been idle this long."""
    sweep_interval_s: float = Field(30.0, gt=0)
    """How often the server expires sessions past their deadline."""

    # --- scoring (see server/scoring/) ---
    judges: list[JudgeEndpoint] = Field(default_factory=list)
    """JSON list of judges (``PROCTOR_JUDGES='[{"name": ..., "base_url": ..., "model": ...}]'``).
    The default judge is the best calibrated one (``proctor judge agreement --store``), else
    the first. With none, objective items are still scored and open ones wait for review."""
    judge_concurrency: int = Field(16, ge=1, le=1024)
    """Judge calls in flight per worker process."""
    judge_max_wait_s: float = Field(30.0, gt=0)
    """A provider's Retry-After longer than this defers the job instead of blocking."""
    judge_max_attempts: int = Field(8, ge=1)
    """Claims of one job after which a judge that stays unavailable leaves it for review."""
    judge_min_calibration_n: int = Field(100, ge=1)
    """Answers a calibration needs before its judge can become the default."""
    scoring_lease_s: float = Field(300.0, gt=0)
    """How long a worker holds a claimed job before another may take it over."""
    scoring_in_process: bool | None = None
    """Run the scoring worker inside the API process. Default: yes without Redis (the
    embedded default), no with Redis (``proctor judge worker`` processes do it)."""
    scoring_poll_s: float = Field(5.0, gt=0)
    """How often a worker looks for work without being woken (deferred jobs, lost wakes)."""
    similarity_match_at: float = Field(0.85, ge=0, le=1)
    similarity_mismatch_below: float = Field(0.15, ge=0, le=1)

    # --- leaderboard and contamination (see server/leaderboard) ---
    leaderboard_public_fields: list[LeaderboardField] = Field(
        default_factory=lambda: list(DEFAULT_PUBLIC_FIELDS)
    )
    """JSON list of the row fields vendors see on ``GET /v1/leaderboard``; admins,
    evaluators and auditors see every field. Known fields: ``LEADERBOARD_FIELDS``."""
    leaderboard_resamples: int = Field(2000, ge=100, le=100_000)
    """Bootstrap replicates behind the leaderboard's intervals and tie groups."""
    leaderboard_tie_threshold: float = Field(0.95, gt=0.5, lt=1)
    """Probability with which a model must beat its neighbour to be ranked apart."""
    contamination_gap_threshold: float = Field(5.0, ge=0, le=100)
    """Points by which a model's generalisation gap may exceed the median gap before it is
    flagged (public sessions versus the private anchor set)."""

    # --- adaptive sessions (see server/sessions/adaptive.py, bank/adaptive) ---
    adaptive_policy: Literal["uniform", "proportional", "neyman", "neyman-irt"] = "neyman-irt"
    """The default policy of ``mode: adaptive`` sessions."""
    adaptive_bound: Literal["hoeffding-serfling", "bernstein-serfling", "normal"] = "normal"
    """The default interval of the stopping rule. ``hoeffding-serfling`` is guaranteed but
    depends on the number of items only (6.4 points at 1,000 items with the default
    schedule), ``normal`` follows the variance (asymptotic; replay coverage in README)."""
    adaptive_target_halfwidth: float = Field(5.0, gt=0, le=50)
    """Default half-width (score points, 0-100) at which an adaptive session stops."""
    adaptive_delta: float = Field(0.05, gt=0, lt=1)
    """Default error probability of the stopping rule's interval, over all its checks."""
    adaptive_check_every: int = Field(10, ge=1, le=1000)
    """The stopping rule is checked after every this many scored items."""
    adaptive_pilot: int = Field(2, ge=0, le=100)
    """Items every stratum gets before the allocation follows the policy."""

    @property
    def runs_scoring_in_process(self) -> bool:
        if self.scoring_in_process is not None:
            return self.scoring_in_process
        return self.redis_url is None

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.data_dir / 'proctor.db'}"

    @property
    def is_embedded(self) -> bool:
        return self.effective_database_url.startswith("sqlite")


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
