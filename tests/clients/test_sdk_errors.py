"""The pure parts of the SDK: problem+json to exception class, Retry-After, the response
types' parsing (forward compatible), backoff. Server behaviour is tested against the real
server in test_sdk_async.py and test_sdk_sync.py; these pin the rules on edge inputs the
server does not produce (proxies, future fields)."""

from __future__ import annotations

import email.utils
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from clients import sdk
from clients.sdk import _core
from clients.sdk.errors import error_from_response, parse_retry_after

TYPE = "https://proctor.dev/problems/"


def response(
    status: int, body: Any = None, *, headers: dict[str, str] | None = None, text: str = ""
) -> httpx.Response:
    request = httpx.Request("GET", "http://proctor.test/v1/x")
    if body is None:
        return httpx.Response(status, text=text, headers=headers, request=request)
    return httpx.Response(status, json=body, headers=headers, request=request)


def problem(status: int, title: str, slug: str | None = None, **extra: Any) -> dict[str, Any]:
    slug = slug if slug is not None else title.lower().replace(" ", "-")
    return {"type": TYPE + slug, "title": title, "status": status, "detail": "d", **extra}


@pytest.mark.parametrize(
    ("status", "title", "expected"),
    [
        (401, "Unauthorized", sdk.AuthenticationError),
        (403, "Forbidden", sdk.PermissionDeniedError),
        (403, "Session in use", sdk.SessionInUseError),
        (404, "Not found", sdk.NotFoundError),
        (409, "Conflict", sdk.ConflictError),
        (409, "Already answered", sdk.AlreadyAnsweredError),
        (409, "Not the pending item", sdk.NotPendingError),
        (409, "Quota exhausted", sdk.QuotaExhaustedError),
        (409, "Session closed", sdk.SessionClosedError),
        (422, "Invalid input", sdk.ValidationError),
        (429, "Too many requests", sdk.RateLimitError),
        (500, "Internal error", sdk.InternalServerError),
        (503, "Service unavailable", sdk.ServiceUnavailableError),
        (405, "Method not allowed", sdk.APIStatusError),
    ],
)
def test_every_server_problem_has_its_class(
    status: int, title: str, expected: type[sdk.APIStatusError]
) -> None:
    error = error_from_response(response(status, problem(status, title)))
    assert type(error) is expected
    assert (error.status, error.title, error.detail) == (status, title, "d")
    assert str(error) == f"{status} {title}: d"


def test_the_type_slug_wins_over_the_title_and_the_title_over_the_status() -> None:
    by_slug = problem(409, "Some new wording", slug="already-answered")
    assert type(error_from_response(response(409, by_slug))) is sdk.AlreadyAnsweredError
    by_title = {"title": "Session in use", "status": 403, "detail": "x"}
    assert type(error_from_response(response(403, by_title))) is sdk.SessionInUseError
    by_status = {"title": "Something else", "status": 409}
    assert type(error_from_response(response(409, by_status))) is sdk.ConflictError


def test_a_class_must_agree_with_the_status() -> None:
    odd = problem(409, "Session in use")  # a 403 title on a 409
    assert type(error_from_response(response(409, odd))) is sdk.ConflictError
    odd = problem(400, "Not found")  # a status without a class of its own
    assert type(error_from_response(response(400, odd))) is sdk.APIStatusError


def test_bodies_that_are_not_problems() -> None:
    page = error_from_response(response(502, text="<html>Bad Gateway</html>"))
    assert type(page) is sdk.InternalServerError
    assert page.title == "Bad Gateway" and "<html>" in page.detail
    assert page.problem["status"] == 502
    assert type(error_from_response(response(504, ["not", "an", "object"]))) is (
        sdk.InternalServerError
    )
    empty = error_from_response(response(404))
    assert type(empty) is sdk.NotFoundError and str(empty) == "404 Not Found"


def test_validation_errors_and_retry_after() -> None:
    invalid = error_from_response(
        response(422, problem(422, "Invalid input", errors=[{"loc": ["body", "x"], "msg": "m"}]))
    )
    assert isinstance(invalid, sdk.ValidationError)
    assert invalid.errors == [{"loc": ["body", "x"], "msg": "m"}]
    limited = error_from_response(
        response(429, problem(429, "Too many requests"), headers={"Retry-After": "7"})
    )
    assert isinstance(limited, sdk.RateLimitError) and limited.retry_after == 7.0
    busy = error_from_response(response(503, problem(503, "Service unavailable")))
    assert isinstance(busy, sdk.ServiceUnavailableError) and busy.retry_after is None
    assert isinstance(busy, sdk.InternalServerError)


def test_retry_after_forms() -> None:
    assert parse_retry_after(httpx.Headers({"Retry-After": "2"})) == 2.0
    assert parse_retry_after(httpx.Headers({"Retry-After": "0.25"})) == 0.25
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "1500", "Retry-After": "9"})) == 1.5
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert parse_retry_after(httpx.Headers({})) is None
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    delay = parse_retry_after(httpx.Headers({"Retry-After": when}))
    assert delay is not None and 25 <= delay <= 31
    past = email.utils.formatdate(time.time() - 30, usegmt=True)
    assert parse_retry_after(httpx.Headers({"Retry-After": past})) == 0.0


def test_the_documented_tree() -> None:
    assert issubclass(sdk.APITimeoutError, sdk.APIConnectionError)
    assert issubclass(sdk.APIConnectionError, sdk.ProctorError)
    assert issubclass(sdk.SessionInUseError, sdk.PermissionDeniedError)
    for conflict in (
        sdk.AlreadyAnsweredError,
        sdk.NotPendingError,
        sdk.QuotaExhaustedError,
        sdk.SessionClosedError,
    ):
        assert issubclass(conflict, sdk.ConflictError)
    for status_error in (sdk.AuthenticationError, sdk.ValidationError, sdk.RateLimitError):
        assert issubclass(status_error, sdk.APIStatusError)
    assert sdk.errors.__doc__ is not None
    for name in sdk.errors.__all__:
        if name[0].isupper():
            assert name in sdk.errors.__doc__ or name == "PROBLEM_TYPE_BASE"


def test_types_ignore_unknown_fields_and_parse_times() -> None:
    session = sdk.Session.from_json(
        {
            "id": "s",
            "org_id": "o",
            "model_id": "m",
            "mode": "fixed",
            "state": "expired",
            "n_items": 3,
            "allocated": 0,
            "pending": 1,
            "completed": 1,
            "released": 1,
            "pending_window": 1,
            "deadline_at": "2026-11-22T10:00:00Z",
            "created_at": "2026-11-21T10:00:00+00:00",
            "ended_at": None,
            "a_field_from_the_future": {"x": 1},
        }
    )
    assert session.done and session.deadline_at == datetime(2026, 11, 22, 10, tzinfo=UTC)
    item = sdk.Item.from_json(
        {
            "position": 0,
            "item_id": "i",
            "question": "q",
            "qtype": "short_answer",
            "discipline": "d",
            "hint": "never",
        }
    )
    assert item.options is None
    model = sdk.Model.from_json(
        {"id": "m", "org_id": "o", "name": "n", "api_snapshot": "v1", "created_at": None}
    )
    assert model.family is None and model.usd_per_mtok_in is None


@pytest.mark.parametrize(
    ("state", "waiting", "complete"),
    [
        ("active", 0, False),
        ("answered", 0, False),
        ("answered", 2, False),
        ("scored", 0, True),
        ("expired", 1, False),
        ("expired", 0, True),
        ("aborted", 0, True),
    ],
)
def test_scoring_is_complete_when_nothing_more_will_be_scored(
    state: str, waiting: int, complete: bool
) -> None:
    progress = sdk.ScoringProgress(
        session_id="s",
        state=state,
        judge="none",
        prompt_version="v1",
        answers=3,
        judged=3 - waiting,
        waiting=waiting,
    )
    assert progress.complete is complete


def test_backoff_is_capped_with_jitter() -> None:
    for retry in range(12):
        delay = _core.backoff(retry)
        ceiling = min(_core.INITIAL_RETRY_DELAY_S * 2**retry, _core.MAX_RETRY_DELAY_S)
        assert 0.75 * ceiling <= delay <= ceiling


def test_a_success_without_the_expected_body_is_a_proctor_error() -> None:
    attempts = _core.Attempts(_core.get_session("s"), max_retries=0)
    with pytest.raises(sdk.ProctorError, match="unexpected 200 response") as raised:
        attempts.after_response(response(200, text="<html>captive portal</html>"))
    assert not isinstance(raised.value, sdk.APIStatusError)
