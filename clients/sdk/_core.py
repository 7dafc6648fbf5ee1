"""The I/O-free part of both clients: calls, response parsing, retry decisions, backoff,
token bookkeeping. :mod:`clients.sdk.client` and :mod:`clients.sdk.async_client` only send
requests, sleep and hold a lock around the token.

Retry policies (``Policy``):

* ``IDEMPOTENT`` (every GET; ``next`` returns the same pending item again; the key
  exchange and the token refresh): transport errors and 429/502/503/504 are retried.
* ``ANSWER`` (``POST .../answers``): transport errors, 429 and every 5xx are retried. An
  attempt that may have reached the server (anything but a connect failure, and any 5xx)
  makes a later 409 "Already answered" mean "the earlier attempt was committed": the call
  then returns ``Accepted(..., already_answered=True)``. Without such an attempt the 409
  is the caller's second answer and raises :class:`AlreadyAnsweredError`.
* ``CREATE`` (``POST /v1/sessions``, ``POST /v1/models``; not idempotent): retried only
  when the request cannot have reached the server (connect errors, pool timeouts) and on
  429, which the server sends before acting.

Every policy waits ``Retry-After`` on 429/503 when the server gives one, up to
``MAX_RETRY_AFTER_S``; a longer wait (a per-period session quota, say) is not slept
through: the error is raised at once. Otherwise the wait is a capped exponential backoff
with jitter. A 401 on a request made with a cached token replaces the token (from the API
key, at most once per call; or by the one another thread or task renewed meanwhile) and
retries, without counting as a retry.
"""

from __future__ import annotations

import enum
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx

from clients.sdk._version import __version__
from clients.sdk.errors import (
    AlreadyAnsweredError,
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    ProctorError,
    RateLimitError,
    ServiceUnavailableError,
    error_from_response,
)
from clients.sdk.retry_wait import exponential_delay
from clients.sdk.types import (
    Accepted,
    AdaptiveOptions,
    CommitmentReveal,
    DisciplineLeaderboard,
    EndpointCheck,
    EndpointSettings,
    FinishReason,
    Identity,
    Item,
    Leaderboard,
    Model,
    ModelEndpoint,
    Run,
    ScoringProgress,
    Session,
    SessionMode,
    Usage,
)

T = TypeVar("T")

USER_AGENT = f"proctor-sdk/{__version__}"
DEFAULT_HEADERS = {"User-Agent": USER_AGENT, "Accept": "application/json"}
INITIAL_RETRY_DELAY_S = 0.5
MAX_RETRY_DELAY_S = 8.0
MAX_RETRY_AFTER_S = 60.0
"""The longest ``Retry-After`` the clients sleep through; beyond it the error is raised."""
MAX_AUTH_RETRIES = 3
"""401s retried in one call: once with a token exchanged from the key, and a few times with
a token another thread or task renewed meanwhile (the refused one was revoked by it)."""

IdLike = str | uuid.UUID
"""A session or model id: a string or a UUID."""
AdaptiveChoice = AdaptiveOptions | dict[str, Any]
"""The options of an adaptive session: typed, or as the JSON object of the API."""
LeaderboardView = Literal["models", "disciplines"]
"""``models``: one row per model (:class:`Leaderboard`); ``disciplines``: the models of
each discipline (:class:`DisciplineLeaderboard`)."""


class Policy(enum.Enum):
    IDEMPOTENT = "idempotent"
    ANSWER = "answer"
    CREATE = "create"


_RETRY_STATUSES = {
    Policy.IDEMPOTENT: frozenset({429, 502, 503, 504}),
    Policy.CREATE: frozenset({429}),
}
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Transport errors raised before the request left the client."""
_RETRYABLE = (
    httpx.NetworkError,
    httpx.TimeoutException,
    httpx.RemoteProtocolError,
    httpx.ProxyError,
)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One API call: the request to make, how to retry it and how to read the answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    policy: Policy = Policy.IDEMPOTENT
    params: dict[str, str | int] | None = None
    json: Any = field(default=None, repr=False)
    headers: dict[str, str] | None = field(default=None, repr=False)
    authenticated: bool = True
    """Send the client's token (exchanged or renewed first when needed)."""
    duplicate: T | None = None
    """``ANSWER``: the result when a retry finds the answer already committed."""


@dataclass(frozen=True)
class Done(Generic[T]):
    value: T


@dataclass(frozen=True)
class Retry:
    delay: float
    reauthenticate: bool = False
    """Replace the token before the next attempt (the last one got a 401)."""


def backoff(retry: int) -> float:
    """Seconds before retry number ``retry`` (0-based): capped exponential, with jitter."""
    delay = exponential_delay(retry, initial_s=INITIAL_RETRY_DELAY_S, max_s=MAX_RETRY_DELAY_S)
    return delay * (1.0 - 0.25 * random.random())


class Attempts(Generic[T]):
    """The retry state of one call; the client reports each outcome and gets told what to
    do next: ``Done``, ``Retry``, or an exception raised from here."""

    def __init__(self, call: Call[T], max_retries: int) -> None:
        self.call = call
        self.retries_left = max_retries
        self.retries = 0
        self.auth_retries = 0
        self.exchanged = False
        """A 401 made the client exchange its key for a new token (done once per call)."""
        self.may_have_committed = False
        """``ANSWER``: an earlier attempt may have reached the server and been committed."""

    def _retry(self, delay: float | None = None) -> Retry:
        self.retries_left -= 1
        wait = backoff(self.retries) if delay is None else delay
        self.retries += 1
        return Retry(wait)

    def after_error(self, error: httpx.RequestError) -> Retry:
        """After a transport error (or any other httpx request error: a body that would
        not decode, ...): a ``Retry``, or raises ``APIConnectionError``."""
        policy = self.call.policy
        sent = not isinstance(error, _NOT_SENT)
        if policy is Policy.ANSWER and sent:
            self.may_have_committed = True
        retryable = isinstance(error, _RETRYABLE) and (policy is not Policy.CREATE or not sent)
        if retryable and self.retries_left > 0:
            return self._retry()
        raise transport_error(error, self.call)

    def after_response(self, response: httpx.Response) -> Done[T] | Retry:
        """After a response: ``Done`` with the parsed result, a ``Retry``, or raises the
        mapped ``APIStatusError``."""
        if response.is_success:
            try:
                return Done(self.call.parse(response))
            except (ValueError, KeyError, TypeError) as bad:  # a proxy's page, say
                raise ProctorError(
                    f"{self.call.method} {self.call.path}: unexpected {response.status_code} "
                    f"response ({type(bad).__name__}: {bad})"
                ) from bad
        error = error_from_response(response)
        call = self.call
        if isinstance(error, AuthenticationError) and call.authenticated:
            if self.exchanged or self.auth_retries >= MAX_AUTH_RETRIES:
                raise error
            self.auth_retries += 1
            return Retry(0.0, reauthenticate=True)
        if (
            isinstance(error, AlreadyAnsweredError)
            and call.policy is Policy.ANSWER
            and self.may_have_committed
            and call.duplicate is not None
        ):
            return Done(call.duplicate)
        status = response.status_code
        if call.policy is Policy.ANSWER:
            retryable = status == 429 or status >= 500
            if status >= 500:
                self.may_have_committed = True
        else:
            retryable = status in _RETRY_STATUSES[call.policy]
        if not retryable or self.retries_left <= 0:
            raise error
        wait: float | None = None
        if isinstance(error, RateLimitError | ServiceUnavailableError):
            wait = error.retry_after
            if wait is not None and wait > MAX_RETRY_AFTER_S:
                raise error
        return self._retry(wait)


def transport_error(error: httpx.RequestError, call: Call[Any]) -> APIConnectionError:
    """The SDK exception for a transport failure (the message names the call, not its
    headers or body)."""
    what = f"{call.method} {call.path}"
    request = _request_of(error)
    if isinstance(error, httpx.TimeoutException):
        return APITimeoutError(f"{what}: timed out ({type(error).__name__})", request=request)
    return APIConnectionError(f"{what}: {type(error).__name__}: {error}", request=request)


def _request_of(error: httpx.RequestError) -> httpx.Request | None:
    try:
        return error.request
    except RuntimeError:  # raised by httpx when the error was made without a request
        return None


def build_request(
    http: httpx.Client | httpx.AsyncClient, call: Call[Any], token: str | None
) -> httpx.Request:
    headers = dict(call.headers or {})
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return http.build_request(
        call.method, call.path, params=call.params, json=call.json, headers=headers
    )


# --------------------------------------------------------------------------- tokens


@dataclass
class TokenState:
    """The client's one bearer token and when it expires (monotonic clock)."""

    refresh_margin_s: float
    token: str | None = field(default=None, repr=False)
    expires_at: float = 0.0

    def store(self, grant: tuple[str, float], started: float) -> None:
        """Keep a token from ``/v1/auth/token`` or ``/refresh``; ``started`` is the monotonic
        time the request was sent (its ``expires_in`` counts from about then)."""
        self.token, expires_in = grant
        self.expires_at = started + expires_in

    def clear(self) -> None:
        self.token = None
        self.expires_at = 0.0

    def remaining(self, now: float | None = None) -> float:
        return self.expires_at - (time.monotonic() if now is None else now)

    def due(self) -> bool:
        """Whether the token should be renewed before it is used."""
        return self.remaining() < self.refresh_margin_s


def _grant(response: httpx.Response) -> tuple[str, float]:
    body = response.json()
    return str(body["access_token"]), float(body["expires_in"])


def exchange(api_key: str) -> Call[tuple[str, float]]:
    """``POST /v1/auth/token``: a token for the API key (no session scope)."""
    return Call("POST", "/v1/auth/token", _grant, json={"api_key": api_key}, authenticated=False)


def refresh(token: str) -> Call[tuple[str, float]]:
    """``POST /v1/auth/refresh``: a fresh token with the same scope and the old one's
    session leases; the old token is revoked."""
    return Call(
        "POST",
        "/v1/auth/refresh",
        _grant,
        headers={"Authorization": f"Bearer {token}"},
        authenticated=False,
    )


# --------------------------------------------------------------------------- API calls


def _segment(value: IdLike) -> str:
    return quote(str(value), safe="")


def _json_dict(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    if not isinstance(body, dict):
        raise TypeError(f"expected a JSON object from {response.request.url.path}")
    return body


def _json_list(response: httpx.Response) -> list[dict[str, Any]]:
    body = response.json()
    if not isinstance(body, list):
        raise TypeError(f"expected a JSON array from {response.request.url.path}")
    return body


def whoami() -> Call[Identity]:
    return Call("GET", "/v1/whoami", lambda r: Identity.from_json(_json_dict(r)))


def register_model(
    *,
    name: str,
    api_snapshot: str,
    family: str | None,
    params_b: float | None,
    usd_per_mtok_in: float | None,
    usd_per_mtok_out: float | None,
) -> Call[Model]:
    body: dict[str, Any] = {"name": name, "api_snapshot": api_snapshot}
    optional = {
        "family": family,
        "params_b": params_b,
        "usd_per_mtok_in": usd_per_mtok_in,
        "usd_per_mtok_out": usd_per_mtok_out,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    return Call(
        "POST",
        "/v1/models",
        lambda r: Model.from_json(_json_dict(r)),
        policy=Policy.CREATE,
        json=body,
    )


def list_models() -> Call[list[Model]]:
    return Call("GET", "/v1/models", lambda r: [Model.from_json(m) for m in _json_list(r)])


def get_model(model_id: IdLike) -> Call[Model]:
    return Call("GET", f"/v1/models/{_segment(model_id)}", lambda r: Model.from_json(_json_dict(r)))


def _endpoint_path(model_id: IdLike) -> str:
    return f"/v1/models/{_segment(model_id)}/endpoint"


def set_endpoint(model_id: IdLike, settings: EndpointSettings) -> Call[ModelEndpoint]:
    return Call(
        "PUT",
        _endpoint_path(model_id),
        lambda r: ModelEndpoint.from_json(_json_dict(r)),
        json=settings.to_json(),  # a whole replacement: repeating it changes nothing more
    )


def get_endpoint(model_id: IdLike) -> Call[ModelEndpoint]:
    return Call("GET", _endpoint_path(model_id), lambda r: ModelEndpoint.from_json(_json_dict(r)))


def delete_endpoint(model_id: IdLike) -> Call[None]:
    return Call("DELETE", _endpoint_path(model_id), lambda r: None, policy=Policy.CREATE)


def check_endpoint(model_id: IdLike) -> Call[EndpointCheck]:
    return Call(
        "POST",
        _endpoint_path(model_id) + "/check",
        lambda r: EndpointCheck.from_json(_json_dict(r)),
        policy=Policy.CREATE,
    )


def start_run(
    *,
    model_id: IdLike,
    sessions: int,
    mode: str,
    n_items: int | None,
    cost_cap_usd: float | None,
) -> Call[Run]:
    body: dict[str, Any] = {"model_id": str(model_id), "sessions": sessions, "mode": mode}
    if n_items is not None:
        body["n_items"] = n_items
    if cost_cap_usd is not None:
        body["cost_cap_usd"] = cost_cap_usd
    return Call(
        "POST", "/v1/runs", lambda r: Run.from_json(_json_dict(r)), json=body, policy=Policy.CREATE
    )


def get_run(run_id: IdLike) -> Call[Run]:
    return Call("GET", f"/v1/runs/{_segment(run_id)}", lambda r: Run.from_json(_json_dict(r)))


def list_runs(state: str | None, model_id: IdLike | None, limit: int | None) -> Call[list[Run]]:
    params: dict[str, Any] = {}
    if state is not None:
        params["state"] = state
    if model_id is not None:
        params["model_id"] = str(model_id)
    if limit is not None:
        params["limit"] = limit
    return Call(
        "GET", "/v1/runs", lambda r: [Run.from_json(x) for x in _json_list(r)], params=params
    )


def move_run(run_id: IdLike, action: str) -> Call[Run]:
    """``pause``, ``resume`` or ``cancel`` (a repeat after a lost response is a 409)."""
    return Call(
        "POST",
        f"/v1/runs/{_segment(run_id)}/{action}",
        lambda r: Run.from_json(_json_dict(r)),
        policy=Policy.CREATE,
    )


def create_session(
    *,
    model_id: IdLike,
    n_items: int | None,
    mode: str,
    adaptive: AdaptiveChoice | None = None,
    item_set: str | None = None,
) -> Call[Session]:
    """The session's body; naming ``item_set`` with the default mode asks for
    ``mode: item_set`` (the server refuses a set with any other mode)."""
    if item_set is not None and mode == SessionMode.FIXED:
        mode = SessionMode.ITEM_SET
    body: dict[str, Any] = {"model_id": str(model_id), "mode": str(mode)}
    if n_items is not None:
        body["n_items"] = n_items
    if item_set is not None:
        body["item_set"] = item_set
    if adaptive is not None:
        body["adaptive"] = adaptive.to_json() if isinstance(adaptive, AdaptiveOptions) else adaptive
    return Call(
        "POST",
        "/v1/sessions",
        lambda r: Session.from_json(_json_dict(r)),
        policy=Policy.CREATE,
        json=body,
    )


def get_session(session_id: IdLike) -> Call[Session]:
    return Call(
        "GET", f"/v1/sessions/{_segment(session_id)}", lambda r: Session.from_json(_json_dict(r))
    )


def abort_session(session_id: IdLike) -> Call[Session]:
    return Call(
        "POST",
        f"/v1/sessions/{_segment(session_id)}/abort",
        lambda r: Session.from_json(_json_dict(r)),
        policy=Policy.CREATE,
    )


def get_commitment(session_id: IdLike) -> Call[CommitmentReveal]:
    return Call(
        "GET",
        f"/v1/sessions/{_segment(session_id)}/commitment",
        lambda r: CommitmentReveal.from_json(_json_dict(r)),
    )


def list_sessions(limit: int | None) -> Call[list[Session]]:
    return Call(
        "GET",
        "/v1/sessions",
        lambda r: [Session.from_json(s) for s in _json_list(r)],
        params=None if limit is None else {"limit": limit},
    )


def _item_or_none(response: httpx.Response) -> Item | None:
    if response.status_code == 204:
        return None
    return Item.from_json(_json_dict(response))


def next_item(session_id: IdLike) -> Call[Item | None]:
    return Call("GET", f"/v1/sessions/{_segment(session_id)}/next", _item_or_none)


def submit_answer(
    session_id: IdLike,
    item: Item,
    answer: str,
    *,
    reasoning: str | None,
    usage: Usage | None,
    finish_reason: FinishReason | None = None,
    model_latency_s: float | None = None,
) -> Call[Accepted]:
    body: dict[str, Any] = {
        "position": item.position,
        "item_id": str(item.item_id),
        "answer": answer,
    }
    if reasoning is not None:
        body["reasoning"] = reasoning
    if usage is not None:
        body["usage"] = usage.to_json()
    if finish_reason is not None:
        body["finish_reason"] = FinishReason(finish_reason).value
    if model_latency_s is not None:
        body["model_latency_s"] = model_latency_s
    duplicate = Accepted(
        session_id=str(session_id),
        position=item.position,
        item_id=str(item.item_id),
        submitted_at=None,
        already_answered=True,
    )
    return Call(
        "POST",
        f"/v1/sessions/{_segment(session_id)}/answers",
        lambda r: Accepted.from_json(_json_dict(r)),
        policy=Policy.ANSWER,
        json=body,
        duplicate=duplicate,
    )


def scoring(session_id: IdLike) -> Call[ScoringProgress]:
    return Call(
        "GET",
        f"/v1/sessions/{_segment(session_id)}/scoring",
        lambda r: ScoringProgress.from_json(_json_dict(r)),
    )


def leaderboard(
    *, view: LeaderboardView, baselines: bool, diagnostics: bool
) -> Call[Leaderboard | DisciplineLeaderboard]:
    """``GET /v1/leaderboard``, read as the type of ``view`` (a view the server does not
    know is its 422)."""
    params: dict[str, str | int] = {"view": view}
    if baselines:
        params["baselines"] = "true"
    if diagnostics:
        params["diagnostics"] = "true"
    board = DisciplineLeaderboard if view == "disciplines" else Leaderboard
    return Call("GET", "/v1/leaderboard", lambda r: board.from_json(_json_dict(r)), params=params)


# --------------------------------------------------------------------------- helpers


class ItemsGuard:
    """Stops ``items()`` from looping forever on one item the caller never answers: the
    server gives the pending item again until it is answered, so an unanswered item coming
    back without any ``submit_answer`` attempt in between is a caller bug."""

    def __init__(self) -> None:
        self.last: Item | None = None
        self.submissions_seen = 0

    def check(self, item: Item, submissions: int) -> None:
        if (
            self.last is not None
            and (self.last.position, self.last.item_id) == (item.position, item.item_id)
            and submissions == self.submissions_seen
        ):
            raise RuntimeError(
                f"items(): position {item.position} came back unanswered; call "
                "submit_answer(session_id, item, ...) before taking the next item"
            )
        self.last = item
        self.submissions_seen = submissions


def validate_options(max_retries: int, refresh_margin_s: float) -> None:
    if max_retries < 0:
        raise ValueError("max_retries must be >= 0")
    if refresh_margin_s < 0:
        raise ValueError("refresh_margin_s must be >= 0")


def scoring_deadline(timeout_s: float) -> float:
    return time.monotonic() + timeout_s


def scoring_timeout(session_id: IdLike, progress: ScoringProgress, timeout_s: float) -> str:
    return (
        f"session {session_id} not scored within {timeout_s:g} s "
        f"(state {progress.state}, {progress.judged}/"
        f"{progress.answers} judged, {progress.waiting} waiting)"
    )
