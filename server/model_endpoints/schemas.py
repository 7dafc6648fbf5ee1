"""Bodies of the model endpoint routes (``/v1/models/{model_id}/endpoint``).

What a body may hold is checked here, once, for the route, the SDK's callers and the
console's form alike: the base URL's form (an http(s) root without credentials, query or
fragment; where it may point is the egress guard's decision at connect time), the header
names and values the server will send, and ranges for every number.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Annotated, Self
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from clients.runner.adapters import ADAPTERS, TEMPLATES, TemplateName
from clients.runner.prompts import PARADIGMS, Paradigm
from clients.sdk.types import CallFailure, ModelApi
from server.api.bodies import RequestBody

MAX_URL = 2000
MAX_SECRET_HEADERS = 16
MAX_HEADER_VALUE = 8192
MAX_STOP = 4
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,100}")
"""An HTTP header name (RFC 9110 §5.1: a token)."""
_VALUE = re.compile(r"[\x20-\x7e\t]+")
"""A header value the server will send: visible ASCII, spaces and tabs, no line breaks."""
RESERVED_HEADERS = frozenset(
    {
        "accept",
        "connection",
        "content-length",
        "content-type",
        "host",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers the client writes itself (framing, the body's type, the connection)."""

CHOICES: dict[str, tuple[str, ...]] = {
    "api": tuple(api.value for api in ModelApi),
    "paradigm": PARADIGMS,
    "adapter": tuple(sorted(ADAPTERS)),
    "template": TEMPLATES,
}
"""The values a form may offer for the endpoint's fields that take one of a few."""

StopSequence = Annotated[str, Field(min_length=1, max_length=64)]


def check_base_url(url: str) -> str:
    """``url`` without a trailing slash if it is an http(s) API root (``https://host/v1``)
    with no credentials, query or fragment; ``ValueError`` saying what is wrong."""
    if not url.isascii() or any(c.isspace() for c in url):
        raise ValueError("must be ASCII without spaces (write an international host in punycode)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError("must start with http:// or https://")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not hold credentials: put the key in secret_headers")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise ValueError("must not have a query or fragment")
    if not parts.hostname:
        raise ValueError("has no host")
    try:
        parts.port  # noqa: B018 -- raises for a port that is not a number in range
    except ValueError:
        raise ValueError("has a bad port") from None
    try:
        httpx.URL(url)  # the client's own parser: it refuses what it could not call
    except httpx.InvalidURL as error:
        raise ValueError(f"is not a URL the server can call ({error})") from None
    return url.rstrip("/")


class EndpointIn(RequestBody):
    """An endpoint to set (it replaces the model's endpoint, if any). ``secret_headers``
    left out (or null) keeps the stored ones; ``{}`` removes them."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    base_url: str = Field(min_length=1, max_length=MAX_URL)
    """The OpenAI-compatible API root, version included (``https://api.example.com/v1``)."""
    model: str = Field(min_length=1, max_length=200)
    """The model's name at the endpoint."""
    api: ModelApi = ModelApi.CHAT
    template: TemplateName | None = None
    """The chat template prompts are rendered in for ``api: completions`` (required there,
    refused with ``chat``)."""
    paradigm: Paradigm = "zero-shot"
    adapter: str = Field("openai", min_length=1, max_length=32)
    """How the prompt is shaped for the model family (``proctor run --adapter``)."""
    system_prompt: str | None = Field(None, max_length=20_000)
    """Replaces the adapter's system prompt."""
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1, le=1_000_000)
    stop: list[StopSequence] = Field(default_factory=list, max_length=MAX_STOP)
    connect_timeout_s: float = Field(5.0, ge=0.1, le=60)
    read_timeout_s: float = Field(120.0, ge=1, le=900)
    concurrency: int = Field(4, ge=1, le=256)
    """Calls in flight at once, across every worker."""
    requests_per_minute: int | None = Field(None, ge=1, le=1_000_000)
    tokens_per_minute: int | None = Field(None, ge=1, le=1_000_000_000)
    usd_per_mtok_in: float | None = Field(None, ge=0, le=1_000_000)
    """Price per million prompt tokens (USD); set on the model (the leaderboard's cost
    reads it there). Left out: the model's price stays."""
    usd_per_mtok_out: float | None = Field(None, ge=0, le=1_000_000)
    secret_headers: dict[str, str] | None = Field(None, max_length=MAX_SECRET_HEADERS)
    """Headers sent with every call (``Authorization: Bearer sk-...``). Write-only: sealed
    at rest, never returned, redacted from errors."""

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, url: str) -> str:
        return check_base_url(url)

    @field_validator("adapter")
    @classmethod
    def _adapter(cls, name: str) -> str:
        if name not in ADAPTERS:
            raise ValueError(f"unknown adapter; known: {', '.join(sorted(ADAPTERS))}")
        return name

    @field_validator("secret_headers")
    @classmethod
    def _secret_headers(cls, headers: dict[str, str] | None) -> dict[str, str] | None:
        if headers is None:
            return None
        seen: set[str] = set()
        for name, value in headers.items():
            lowered = name.lower()
            if not _TOKEN.fullmatch(name):
                raise ValueError("a header name is not an HTTP token (letters, digits, -_.)")
            if lowered in RESERVED_HEADERS:
                raise ValueError(f"header {name!r} is set by the server itself")
            if lowered in seen:
                raise ValueError(f"header {name!r} is named twice")
            seen.add(lowered)
            # the value is never echoed, not even in this message
            if len(value) > MAX_HEADER_VALUE or not _VALUE.fullmatch(value):
                raise ValueError(
                    f"the value of {name!r} must be 1 to {MAX_HEADER_VALUE} visible ASCII "
                    "characters without line breaks"
                )
        return headers

    @model_validator(mode="after")
    def _template_with_completions(self) -> Self:
        if self.api is ModelApi.COMPLETIONS and self.template is None:
            raise ValueError("api 'completions' needs a template (chatml, llama3 or alpaca)")
        if self.api is ModelApi.CHAT and self.template is not None:
            raise ValueError("a template is for api 'completions' (chat endpoints apply their own)")
        return self


class EndpointOut(BaseModel):
    """A model's endpoint as the server calls it; of the secret headers, only the names."""

    model_config = ConfigDict(protected_namespaces=())

    model_id: uuid.UUID
    base_url: str
    model: str
    api: ModelApi
    paradigm: Paradigm
    adapter: str
    template: TemplateName | None
    system_prompt: str | None
    temperature: float
    max_tokens: int | None
    stop: list[str]
    connect_timeout_s: float
    read_timeout_s: float
    concurrency: int
    requests_per_minute: int | None
    tokens_per_minute: int | None
    usd_per_mtok_in: float | None
    usd_per_mtok_out: float | None
    secret_headers: list[str]
    """The names of the secret headers (never their values)."""
    updated_at: datetime


class EndpointCheckOut(BaseModel):
    """The outcome of one small call the server made to the endpoint."""

    ok: bool
    latency_s: float | None
    """Seconds the call took (None when no call was made)."""
    failure: CallFailure | None
    detail: str | None
    """What went wrong, one line, secrets redacted."""
    reply: str | None
    """The first characters of the model's reply."""
