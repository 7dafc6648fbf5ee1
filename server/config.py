"""Settings from the environment (prefix ``PROCTOR_``) via pydantic-settings."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from clients.sdk.types import AdaptiveBound, AdaptivePolicy
from judge.panel import PanelRule
from server.leaderboard.fields import DEFAULT_PUBLIC_FIELDS, LeaderboardField
from server.observability.log_format import LogFormat, LogLevel

ENV_PREFIX = "PROCTOR_"


class InvalidSettings(ValueError):
    """The ``PROCTOR_`` settings are refused; ``lines`` name each variable and what is
    wrong with it (``PROCTOR_X: why``), for a message without a traceback."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))

    @classmethod
    def of(cls, error: ValidationError) -> InvalidSettings:
        lines = []
        for problem in error.errors(include_url=False):
            variable = ENV_PREFIX + "_".join(str(part) for part in problem["loc"]).upper()
            message = str(problem["msg"]).removeprefix("Value error, ")
            lines.append(message if message.startswith(variable) else f"{variable}: {message}")
        return cls(lines)


def default_data_dir() -> Path:
    """Where the embedded default keeps its SQLite file: ``$XDG_DATA_HOME/proctor``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "proctor"


DEFAULT_JUDGE_MAX_TOKENS = 1024
"""A judge reply's length cap unless its ``PROCTOR_JUDGES`` entry sets ``max_tokens``."""


class JudgeEndpoint(BaseModel):
    """One LLM judge behind an OpenAI-compatible endpoint (an entry of ``PROCTOR_JUDGES``)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._:@/-]+$")
    """Stable identity stored with every verdict: include the model snapshot, e.g.
    ``gpt-4o-2024-11-20``; a new snapshot is a new judge. Not ``human:...``: that names the
    human reviewers."""
    base_url: str
    """E.g. ``https://api.openai.com/v1``."""
    model: str
    """Model name sent in each chat request."""
    api_key: SecretStr | None = None
    """Bearer key of the endpoint; unset for a local endpoint without one."""
    input_per_mtok: float = Field(0.0, ge=0)
    """Price per million prompt tokens (cost accounting)."""
    output_per_mtok: float = Field(0.0, ge=0)
    """Price per million completion tokens (cost accounting)."""
    read_timeout_s: float = Field(60.0, gt=0)
    """Seconds to wait for the judge's reply before the call counts as failed."""
    max_tokens: int = Field(DEFAULT_JUDGE_MAX_TOKENS, ge=16, le=131_072)
    """Most tokens one reply may have (sent as ``max_tokens``): a judge that rambles stops
    there instead of generating until its context is full. The rubric's verdict and
    reason take a few hundred; a reasoning judge needs more."""


class Settings(BaseSettings):
    """Every ``PROCTOR_`` variable. See docs/configuration.md."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=".env",
        extra="ignore",
        use_attribute_docstrings=True,
        hide_input_in_errors=True,  # a refused secret must not end up in a log
    )

    data_dir: Path = Field(default_factory=default_data_dir)
    """Directory of the embedded SQLite database (``PROCTOR_DATA_DIR``)."""
    database_url: str = ""
    """SQLAlchemy async URL the server connects with, e.g.
    ``postgresql+asyncpg://proctor_app:pw@host/db``; empty means the embedded default
    ``sqlite+aiosqlite:///<data_dir>/proctor.db``. On PostgreSQL this should be the runtime
    role, which owns nothing (see ``migration_database_url``)."""
    migration_database_url: str = ""
    """URL of the role that owns the schema (``proctor db upgrade`` and the migration step
    of ``proctor serve`` use it, then grant the runtime role of ``database_url`` only what
    it needs). Empty: migrations run as ``database_url``'s role, which then owns the tables,
    audit log included; ``proctor serve`` warns about that."""
    redis_url: str | None = None
    """``redis://host:port/db``; unset means in-process stand-ins (embedded default)."""
    redis_timeout_s: float = Field(0.5, gt=0, le=60)
    """Seconds a Redis connection or command may take. Redis is disposable: past this the
    rate limiter lets the request through and scoring wake-ups are skipped (the workers
    poll), and neither asks Redis again for 5 s."""

    # --- authentication (see server/auth/tokens.py) ---
    jwt_secret: SecretStr | None = None
    """HS256 signing secret, at least 32 bytes (``PROCTOR_JWT_SECRET``); a known placeholder
    (``secret``, ``change-me``, ...), a shorter one or one of fewer than 8 distinct
    characters is refused by the server and every command. Unset on the embedded default: a
    random one is generated into ``<data_dir>/jwt-secret``; unset with PostgreSQL: the server
    refuses to start."""
    jwt_algorithm: str = "HS256"
    """The one algorithm tokens are signed and verified with: HS256, or an asymmetric
    RS256 / ES256 / EdDSA with the two key files below (never mixed)."""
    jwt_private_key_file: Path | None = None
    """PEM private key that signs tokens (asymmetric ``jwt_algorithm`` only)."""
    jwt_public_key_file: Path | None = None
    """PEM public key that verifies tokens (asymmetric ``jwt_algorithm`` only)."""
    jwt_issuer: str = "proctor"
    """``iss`` of issued tokens; a token with another issuer is refused."""
    jwt_audience: str = "proctor-api"
    """``aud`` of issued tokens; a token for another audience is refused."""
    token_ttl_s: int = Field(900, ge=30, le=86_400)
    """Lifetime of an access token."""
    token_max_age_s: int = Field(3600, ge=30, le=86_400)
    """Tokens older than this (by ``iat``) are refused whatever their ``exp`` says."""
    token_leeway_s: int = Field(5, ge=0, le=60)
    """Clock skew tolerated on ``exp``, ``nbf`` and ``iat``."""

    # --- quotas and limits ---
    rate_limit_per_minute: int = Field(1200, ge=1)
    """Requests per API key per minute (whichever of its tokens they carry); key exchanges
    per client address per minute use a tenth of it."""
    rate_limit_org_per_minute: int = Field(6000, ge=1)
    """Requests per organisation per minute, over all its keys."""
    auth_failures_per_minute: int = Field(60, ge=1)
    """Refused authentications (no, bad, expired or revoked token; bad key) per client
    address per minute; past it the address gets 429 before anything is verified."""
    max_body_bytes: int = Field(2 * 1024 * 1024, ge=1024, le=1024**3)
    """Largest request body; a larger one is refused with 413 before it is read."""
    max_json_depth: int = Field(32, ge=2, le=1000)
    """Deepest nesting of arrays and objects a JSON body may have (422 beyond)."""
    http_header_timeout_s: float = Field(10.0, gt=0, le=600)
    """Time a client has to send a request's headers, from its first byte (or the
    connection) on; a slower one is disconnected (``proctor serve``)."""
    http_body_timeout_s: float = Field(60.0, gt=0, le=3600)
    """Time a client has to send a request's body once its headers are in."""
    trusted_proxies: str = ""
    """Comma-separated addresses of reverse proxies whose ``X-Forwarded-For`` names the
    client (``proctor serve``); empty: the peer address is the client. Behind a proxy, set
    it, or every client shares the proxy's per-address limits (refused logins, key
    exchanges)."""
    http_max_connections: int = Field(1000, ge=1)
    """Concurrent connections and requests per server process; beyond it, 503."""
    max_concurrent_sessions: int = Field(5, ge=1)
    """Open (created or active) sessions per organisation."""
    max_sessions_per_period: int = Field(50, ge=1)
    """Sessions an organisation may create per ``session_period_s``."""
    session_period_s: int = Field(86_400, ge=60)
    """The period over which ``max_sessions_per_period`` counts."""
    default_session_items: int = Field(1000, ge=1)
    """Items in a session that does not ask for ``n_items`` (and in every vendor session)."""
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

    # --- bank health ---
    health_interval_s: float = Field(300.0, gt=0)
    """How often the scoring worker (in-process on the embedded default) checks whether
    enough new verdicts arrived to recompute the bank's health."""
    health_min_new_verdicts: int = Field(500, ge=1)
    """New verdicts since the last health snapshot that trigger a new one."""
    health_flag: bool = True
    """Whether the scheduled health job moves items its rules flag to ``flagged``."""
    health_flag_max_share: float = Field(0.1, gt=0, le=1)
    """The scheduled job flags nothing (and logs a warning) when its rules would move more
    than this share of the active items at once: thresholds that fit the population badly
    must not empty the bank unattended (``proctor bank health --flag`` has no such cap)."""
    health_thresholds: dict[str, float] = Field(default_factory=dict)
    """Review-rule thresholds that differ from the defaults, as JSON, e.g.
    ``{"saturated_p": 0.99, "family_inversions": 2}`` (names: see docs/health.md)."""
    health_keep_snapshots: int = Field(200, ge=1)
    """Health snapshots the job keeps per population (older ones are deleted)."""
    health_population: str = "all"
    """The model population of scheduled health snapshots (``all``, ``top:10``,
    ``family:NAME``, ``models:A,B``, ``before:YYYY-MM-DD``, ``after:YYYY-MM-DD``)."""

    # --- operations (see docs/operations.md) ---
    metrics_token: SecretStr | None = None
    """Bearer token a Prometheus scrape must present at ``GET /metrics``. Unset: ``/metrics``
    answers 404 (the metrics are never public)."""
    log_format: LogFormat = LogFormat.AUTO
    """``auto``: human-readable on a terminal, one JSON object per line otherwise; ``json``;
    ``console``."""
    log_level: LogLevel = LogLevel.INFO
    """The lowest level of the log lines written."""
    shutdown_grace_s: float = Field(30.0, gt=0, le=3600)
    """On SIGTERM, seconds an API process waits for its in-flight requests, and a judge
    worker for its claimed scoring jobs, before it exits."""

    # --- encryption of the bank at rest (see docs/operations.md) ---
    bank_key_file: Path | None = None
    """File holding the keys that encrypt reference answers and explanations in the
    database. Unset: ``PROCTOR_BANK_KEYS``, else (embedded default) ``<data_dir>/bank-keys``,
    generated with mode 0600 on first use."""
    bank_keys: SecretStr | None = None
    """The bank's keys given in the environment instead of a file (same format as the
    file)."""

    # --- audit log ---
    audit_spool_dir: Path | None = None
    """Where audit rows wait while the database is unreachable (default
    ``<data_dir>/audit-spool``); they are written to the database once it is back."""
    audit_signing_key: SecretStr | None = None
    """The Ed25519 private key that signs the checkpoints of the audit and results chains
    and the exported session bundles (``server.ledger.signing``): base64 of the 32-byte
    raw key, or a PEM (PKCS#8). Unset: ``PROCTOR_AUDIT_SIGNING_KEY_FILE``, else (embedded
    default) ``<data_dir>/audit-signing-key``, generated with mode 0600 on first use."""
    audit_signing_key_file: Path | None = None
    """File holding the checkpoint signing key (same formats as ``audit_signing_key``);
    refused if group or others may read it."""
    audit_checkpoint_rows: int = Field(1000, ge=1, le=10_000_000)
    """A chain's writer signs a checkpoint after this many new rows ..."""
    audit_checkpoint_s: float = Field(60.0, gt=0, le=86_400)
    """... or this many seconds after its last checkpoint if rows were written since,
    whichever comes first."""
    audit_refusal_window_s: float = Field(60.0, gt=0, le=3600)
    """Repeated refusals (any 4xx without a principal; 429 of anyone) of one client address,
    subject, method, route and status within this window are written as one audit row with
    a ``repeats`` count."""

    # --- scoring (see server/scoring/) ---
    judges: list[JudgeEndpoint] = Field(default_factory=list)
    """JSON list of judges (``PROCTOR_JUDGES='[{"name": ..., "base_url": ..., "model": ...}]'``),
    in order of preference: the default judge is the first that passes the calibration gate
    and is not drifting (``judge_gate_min_kappa``). With none, objective items are still
    scored and open ones wait for review."""
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
    # --- evaluation runs the server drives ---
    runs_in_process: bool | None = None
    """Drive runs inside the API process. Default: yes without Redis (the embedded
    default), no with Redis (``proctor run-worker`` processes do it)."""
    run_api_url: str = "http://127.0.0.1:8000"
    """Where ``proctor run-worker`` reaches Proctor's API (runs open and answer sessions
    through it, as the key that started them)."""
    run_slots_per_worker: int = Field(64, ge=1, le=10_000)
    """Sessions one worker drives at once (each has at most one model call in flight)."""
    run_lease_s: float = Field(30.0, ge=1, le=3600)
    """How long a worker holds a session of a run without renewing before another may take
    it over (a worker renews every third of it)."""
    run_poll_s: float = Field(2.0, gt=0, le=600)
    """How often a run worker looks for work without being woken."""
    similarity_backend: Literal["lexical", "embedding"] = "lexical"
    """The cascade's similarity filter: ``lexical`` (token and character overlap), or
    ``embedding`` (a multilingual sentence encoder, extra ``proctor[embed]``, with its own
    calibrated thresholds; it decides fewer answers on GAOKAO-Bench: docs/benchmarks.md)."""
    similarity_match_at: float = Field(0.85, ge=0, le=1)
    """Similarity to the reference at or above which the lexical filter scores a match."""
    similarity_mismatch_below: float = Field(0.15, ge=0, le=1)
    """Similarity below which the filter scores a mismatch; in between, the judge decides."""

    # --- judging v2: panels, human review, the calibration gate, drift ---
    judge_panel: list[str] = Field(default_factory=list)
    """JSON list of judge names that score every answer as a panel: the answer's verdict is
    ``judge_panel_rule`` of their scores, and answers they disagree on go to review. Empty:
    the default judge alone. Only judges that pass the gate and are not drifting sit on it."""
    judge_panel_by_discipline: dict[str, list[str]] = Field(default_factory=dict)
    """JSON object discipline -> judge names: the panel of that discipline's answers."""
    judge_panel_rule: PanelRule = PanelRule.MEDIAN
    """How a panel's scores of one answer become its verdict: ``median`` or ``mean``."""
    review_audit_rate: float = Field(0.02, ge=0, le=1)
    """Share of judged answers (judge or similarity filter) drawn for human review,
    systematically within each (discipline, judge) stratum."""
    review_dual_rate: float = Field(0.1, ge=0, le=1)
    """Share of review tasks that wait for two reviewers (dual annotation)."""
    review_disagreement_points: int = Field(2, ge=1, le=3)
    """Panel judges whose scores of an answer differ by this much send it to review."""
    judge_gate_min_kappa: float = Field(0.6, ge=-1, le=1)
    """A judge may score by default only if the lower bound of the 95% interval of its
    quadratic-weighted kappa on the current calibration set is at least this."""
    judge_gate_set: str | None = None
    """Name of the calibration set the gate reads (its newest version); default: the newest
    set. With no calibration set at all the gate is open: the first configured judge
    scores, and the leaderboard says the judge is uncalibrated."""
    judge_drift_interval_s: float = Field(3600.0, ge=0)
    """How often the default judge re-scores the fixed drift subset of the calibration set
    (0: never)."""
    judge_drift_items: int = Field(40, ge=5, le=10_000)
    """Answers in the drift subset (the first ones of the set's fixed shuffled order)."""

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

    # --- calls to URLs others give the server (see clients/llm/egress.py) ---
    egress_allow: list[str] = Field(default_factory=list)
    """JSON list of addresses, networks (CIDR) and host names the server may call when a
    URL comes from someone else (a model's endpoint), besides public addresses: loopback,
    private, link-local and metadata addresses are refused otherwise, whatever the URL's
    spelling, its redirects or its DNS answers."""
    egress_proxy: str | None = None
    """An HTTP(S) proxy every such call goes through (the proxy is then the one address
    connected to)."""
    egress_max_response_bytes: int = Field(16 * 1024 * 1024, ge=1024, le=1024**3)
    """The largest response body read from such a URL."""

    # --- admin console (see server/console, docs/console.md) ---
    console_idle_s: int = Field(1800, ge=60, le=86_400)
    """A console login ends after this many seconds without a request."""
    console_max_age_s: int = Field(43_200, ge=300, le=7 * 86_400)
    """A console login ends this many seconds after it began, however busy."""
    console_secure_cookie: bool = False
    """Mark the console's cookie ``Secure`` on every response, not only on requests that
    came over HTTPS (set it behind a TLS-terminating proxy that does not pass the scheme)."""

    # --- adaptive sessions (see server/sessions/adaptive.py, bank/adaptive) ---
    adaptive_policy: AdaptivePolicy = AdaptivePolicy.MODEL_ASSISTED
    """The default policy of ``mode: adaptive`` sessions (``model-assisted`` always uses
    the ``normal`` interval; see docs/methods.md)."""
    adaptive_bound: AdaptiveBound = AdaptiveBound.NORMAL
    """The default interval of the stopping rule. ``hoeffding-serfling`` is guaranteed but
    depends on the number of items only (6.4 points at 1,000 items with the default
    schedule), ``normal`` follows the variance (asymptotic; replay coverage in
    docs/benchmarks.md)."""
    adaptive_target_halfwidth: float = Field(7.25, gt=0, le=50)
    """Default half-width (score points, 0-100) at which an adaptive session stops."""
    adaptive_delta: float = Field(0.05, gt=0, lt=1)
    """Default error probability of the stopping rule's interval, over all its checks."""
    adaptive_check_every: int = Field(10, ge=1, le=1000)
    """The stopping rule is checked after every this many scored items."""
    adaptive_pilot: int = Field(2, ge=0, le=100)
    """Items every stratum gets before the allocation follows the policy."""

    @field_validator("health_thresholds")
    @classmethod
    def _known_thresholds(cls, value: dict[str, float]) -> dict[str, float]:
        # The checks of this and the next validators import what they check with only when
        # they run: every `proctor` command reads the settings, most need none of them.
        from bank.health.flags import parse_thresholds

        parse_thresholds(value)  # ValueError names the threshold and what is wrong
        return value

    @field_validator("egress_allow")
    @classmethod
    def _egress_entries(cls, value: list[str]) -> list[str]:
        from clients.llm.egress import EgressPolicy

        EgressPolicy.allowing(value)  # ValueError names the entry
        return value

    @field_validator("health_population")
    @classmethod
    def _known_population(cls, value: str) -> str:
        from bank.health.population import parse_population

        parse_population(value)  # ValueError names what is wrong
        return value

    @model_validator(mode="after")
    def _panel_of_configured_judges(self) -> Settings:
        from server.review.raters import HUMAN_PREFIX

        names = {judge.name for judge in self.judges}
        people = sorted(name for name in names if name.startswith(HUMAN_PREFIX))
        if people:
            raise ValueError(f"judges: {people[0]}: {HUMAN_PREFIX!r} names the human reviewers")
        panels = {"judge_panel": self.judge_panel} | {
            f"judge_panel_by_discipline[{discipline}]": panel
            for discipline, panel in self.judge_panel_by_discipline.items()
        }
        for where, panel in panels.items():
            unknown = [name for name in panel if name not in names]
            if unknown:
                raise ValueError(f"{where}: {', '.join(unknown)} is not a configured judge")
            if len(set(panel)) != len(panel):
                raise ValueError(f"{where}: a judge is named twice")
        return self

    @field_validator("jwt_secret")
    @classmethod
    def _strong_secret(cls, secret: SecretStr | None) -> SecretStr | None:
        """Refuse a known placeholder, one under 32 bytes or one of few distinct
        characters, wherever settings are read (the server and every CLI command)."""
        if secret is not None:
            from server.auth.tokens import KeyConfigurationError, check_secret

            try:
                check_secret(secret.get_secret_value())
            except KeyConfigurationError as error:
                raise ValueError(str(error)) from None
        return secret

    @property
    def runs_scoring_in_process(self) -> bool:
        if self.scoring_in_process is not None:
            return self.scoring_in_process
        return self.redis_url is None

    @property
    def drives_runs_in_process(self) -> bool:
        if self.runs_in_process is not None:
            return self.runs_in_process
        return self.redis_url is None

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.data_dir / 'proctor.db'}"

    @property
    def effective_migration_url(self) -> str:
        """The URL migrations run as: the owner's, else the server's own."""
        return self.migration_database_url or self.effective_database_url

    @property
    def effective_audit_spool_dir(self) -> Path:
        return self.audit_spool_dir or self.data_dir / "audit-spool"

    @property
    def is_embedded(self) -> bool:
        return self.effective_database_url.startswith("sqlite")


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once; ``InvalidSettings`` if any is refused."""
    try:
        return Settings()
    except ValidationError as error:
        raise InvalidSettings.of(error) from None
