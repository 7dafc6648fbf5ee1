"""The stand-in provider's HTTP API (Starlette): a subset of OpenAI's, plus test counters.

* ``POST /v1/chat/completions``: OpenAI's request and response schema. Unknown model → 404,
  malformed body → 400, wrong bearer key (when one is configured) → 401, each with an
  OpenAI-style body ``{"error": {"message", "type", "param", "code"}}``.
* ``GET /v1/models``: the profiles served.
* ``GET /stats``: counters of chat requests (total, by status, by model, requests in flight
  now and at most); ``POST /stats/reset`` zeroes them.
* ``PATCH /admin/profiles/{name}``: change fields of a served profile while the server runs
  (a JSON object of profile fields, as in a profile file), e.g. raise a judge's ``noise``
  mid-run to make it drift; 404 for an unknown profile, 400 for a bad field. Like
  ``/stats`` it is for tests and takes no key.

Latency is an ``asyncio.sleep`` (the loop keeps serving other requests meanwhile). Error
injection answers a seeded-random fraction of chat requests at once, without latency, with
``error_status`` and the ``Retry-After`` / ``retry-after-ms`` headers real providers send.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fakellm.answer_key import AnswerKey
from fakellm.behaviour import (
    Message,
    Reply,
    count_tokens,
    judge_reply,
    last_user_text,
    model_reply,
)
from fakellm.limits import LimitError, check_request, shape_reply
from fakellm.profiles import BUILTIN_PROFILES, ModelProfile, merge_profiles

CREATED = int(time.time())
"""``created`` of every listed model: when the server module was loaded."""


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """What the server serves and how it misbehaves."""

    profiles: Mapping[str, ModelProfile] = field(default_factory=lambda: dict(BUILTIN_PROFILES))
    answer_key: AnswerKey | None = None
    """Reference answers for the model role; without one models answer "I don't know"."""
    latency_ms: float = 0.0
    """Delay before every chat reply (not before injected errors)."""
    error_rate: float = 0.0
    """Fraction of chat requests answered with ``error_status`` at once."""
    retry_after: float = 1.0
    """Seconds advertised by injected errors: ``Retry-After: ceil(s)``, ``retry-after-ms``."""
    error_status: int = 429
    seed: int = 0
    """Seeds correctness, judge noise and error injection."""
    api_key: str | None = None
    """When set, ``/v1/*`` requires ``Authorization: Bearer <api_key>``."""

    def __post_init__(self) -> None:
        if not math.isfinite(self.latency_ms) or self.latency_ms < 0:
            raise ValueError(f"latency_ms must be >= 0, not {self.latency_ms}")
        if not 0.0 <= self.error_rate <= 1.0:
            raise ValueError(f"error_rate must be between 0 and 1, not {self.error_rate}")
        if not math.isfinite(self.retry_after) or self.retry_after < 0:
            raise ValueError(f"retry_after must be >= 0, not {self.retry_after}")
        if not 400 <= self.error_status <= 599:
            raise ValueError(
                f"error_status must be an HTTP error (400-599), not {self.error_status}"
            )
        if not self.profiles:
            raise ValueError("no profiles to serve")


@dataclass(slots=True)
class Stats:
    """Counters of ``POST /v1/chat/completions`` requests."""

    requests: int = 0
    by_status: Counter[int] = field(default_factory=Counter)
    by_model: Counter[str] = field(default_factory=Counter)
    in_flight: int = 0
    max_in_flight: int = 0

    def begin(self) -> None:
        """A request arrived."""
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def end(self, status: int, model: str | None) -> None:
        """A request was answered with ``status``."""
        self.in_flight -= 1
        self.by_status[status] += 1
        if model is not None:
            self.by_model[model] += 1

    def reset(self) -> None:
        """Zero the counters (requests still in flight stay counted as in flight)."""
        self.requests = 0
        self.by_status.clear()
        self.by_model.clear()
        self.max_in_flight = self.in_flight

    def as_json(self) -> dict[str, Any]:
        """The counters as a JSON object (status codes as string keys)."""
        return {
            "requests": self.requests,
            "by_status": {str(code): n for code, n in sorted(self.by_status.items())},
            "by_model": dict(sorted(self.by_model.items())),
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
        }


class ApiError(Exception):
    """An OpenAI-style error response."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.code = code
        self.param = param
        self.headers = dict(headers or {})

    def response(self) -> Response:
        """The error as a JSON response."""
        body = {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }
        return _json(body, self.status, self.headers)


def _json(body: object, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return Response(content, status, dict(headers or {}), media_type="application/json")


def retry_headers(seconds: float) -> dict[str, str]:
    """``Retry-After`` (whole seconds, rounded up) and ``retry-after-ms`` for ``seconds``."""
    millis = seconds * 1000
    as_ms = str(int(millis)) if float(millis).is_integer() else f"{millis:.3f}".rstrip("0")
    return {"Retry-After": str(math.ceil(seconds)), "retry-after-ms": as_ms}


def _request_object(body: bytes) -> tuple[dict[str, Any], str]:
    """The JSON object of a completions body and its model; ``ApiError`` (400) for bad
    JSON, a missing model or a streaming request."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"The body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError(400, "The body must be a JSON object.", code="invalid_json")
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "'model' must be a non-empty string.", param="model")
    if data.get("stream"):
        raise ApiError(400, "Streaming is not supported by this server.", param="stream")
    return data, model


def parse_max_tokens(body: bytes) -> int | None:
    """The request's ``max_tokens`` (``max_completion_tokens`` too); None if absent."""
    data, _ = _request_object(body)
    for name in ("max_tokens", "max_completion_tokens"):
        value = data.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ApiError(400, f"'{name}' must be a positive integer.", param=name)
        return value
    return None


def parse_chat_request(body: bytes) -> tuple[str, list[Message]]:
    """The model and messages of a chat-completions body; ``ApiError`` (400) if malformed.

    Message content may be a string or a list of ``{"type": "text", "text": ...}`` parts
    (joined); other parts are refused.
    """
    data, model = _request_object(body)
    raw_messages = data.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise ApiError(400, "'messages' must be a non-empty array.", param="messages")
    messages: list[Message] = []
    for index, raw in enumerate(raw_messages):
        param = f"messages[{index}]"
        if not isinstance(raw, dict):
            raise ApiError(400, f"'{param}' must be an object.", param=param)
        role = raw.get("role")
        if not isinstance(role, str) or not role:
            raise ApiError(400, f"'{param}.role' must be a string.", param=f"{param}.role")
        messages.append({"role": role, "content": _content(raw.get("content"), param)})
    return model, messages


def parse_text_request(body: bytes) -> tuple[str, list[Message]]:
    """The model and prompt of a (legacy) text-completions body, the prompt as one user
    message; ``ApiError`` (400) if malformed. A prompt rendered in a chat template is
    answered as the question it contains (the answer key finds it inside any text)."""
    data, model = _request_object(body)
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise ApiError(400, "'prompt' must be a non-empty string.", param="prompt")
    return model, [{"role": "user", "content": prompt}]


def _content(raw: object, param: str) -> str:
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        texts = []
        for part in raw:
            if not (isinstance(part, dict) and part.get("type") == "text"):
                raise ApiError(400, f"'{param}.content' parts must be text.", param=param)
            text = part.get("text")
            if not isinstance(text, str):
                raise ApiError(400, f"'{param}.content' text must be a string.", param=param)
            texts.append(text)
        return "".join(texts)
    raise ApiError(400, f"'{param}.content' must be a string or an array of text parts.")


class FakeProvider:
    """The state behind the routes: configuration, counters and the error dice."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.profiles: dict[str, ModelProfile] = dict(config.profiles)
        """The profiles served now (``PATCH /admin/profiles/{name}`` changes them)."""
        self.stats = Stats()
        self._dice = random.Random(config.seed)

    def check_key(self, request: Request) -> None:
        """Raise 401 unless the configured bearer key (if any) was sent."""
        if self.config.api_key is None:
            return
        if request.headers.get("authorization") != f"Bearer {self.config.api_key}":
            raise ApiError(
                401,
                "Incorrect API key provided.",
                code="invalid_api_key",
                type_="invalid_request_error",
            )

    def answer(self, profile: ModelProfile, messages: list[Message]) -> Reply:
        """The reply of ``profile`` to ``messages``."""
        if profile.role == "judge":
            return judge_reply(profile, messages, self.config.seed)
        key = self.config.answer_key
        item = key.lookup(last_user_text(messages)) if key is not None else None
        decoys = key.answers_like(item) if key is not None and item is not None else ()
        return model_reply(profile, item, self.config.seed, decoys=decoys)

    async def chat(self, request: Request) -> Response:
        """``POST /v1/chat/completions``."""
        return await self._counted(request, text=False)

    async def text(self, request: Request) -> Response:
        """``POST /v1/completions`` (raw prompts, e.g. base models behind a chat template)."""
        return await self._counted(request, text=True)

    async def _counted(self, request: Request, *, text: bool) -> Response:
        self.stats.begin()
        status, model = 500, None
        try:
            response, model = await self._respond(request, text=text)
            status = response.status_code
            return response
        finally:
            self.stats.end(status, model)

    async def _respond(self, request: Request, *, text: bool) -> tuple[Response, str | None]:
        model: str | None = None
        parse = parse_text_request if text else parse_chat_request
        try:
            self.check_key(request)
            raw = await request.body()
            model, messages = parse(raw)
            max_tokens = parse_max_tokens(raw)
            if self._dice.random() < self.config.error_rate:
                raise self._injected_error()
            profile = self.profiles.get(model)
            if profile is None:
                raise ApiError(
                    404,
                    f"The model '{model}' does not exist or you do not have access to it.",
                    code="model_not_found",
                    param="model",
                )
            latency_ms = (
                self.config.latency_ms if profile.latency_ms is None else profile.latency_ms
            )
            if latency_ms > 0:
                await asyncio.sleep(latency_ms / 1000)
            check_request(profile, messages)
            reply, finish = shape_reply(
                profile, self.answer(profile, messages), messages, max_tokens
            )
            body = self._completion(model, messages, reply, finish)
            if text:
                body = self._as_text_completion(body, reply, finish)
            return _json(body), model
        except LimitError as limit:
            kind = "server_error" if limit.status >= 500 else "invalid_request_error"
            return ApiError(
                limit.status, limit.message, type_=kind, code=limit.code
            ).response(), model
        except ApiError as error:
            return error.response(), model

    def _injected_error(self) -> ApiError:
        status = self.config.error_status
        if status == 429:
            return ApiError(
                429,
                "Rate limit reached (injected by the fake LLM server). Please retry later.",
                type_="requests",
                code="rate_limit_exceeded",
                headers=retry_headers(self.config.retry_after),
            )
        return ApiError(
            status,
            f"Injected error {status} from the fake LLM server. Please retry later.",
            type_="server_error" if status >= 500 else "invalid_request_error",
            code="injected_error",
            headers=retry_headers(self.config.retry_after),
        )

    @staticmethod
    def _completion(
        model: str, messages: list[Message], reply: Reply, finish: str
    ) -> dict[str, Any]:
        message: dict[str, str] = {"role": "assistant", "content": reply.content}
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        prompt_tokens = count_tokens("".join(m["content"] for m in messages))
        completion_tokens = count_tokens(reply.content + (reply.reasoning or ""))
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    @staticmethod
    def _as_text_completion(chat: dict[str, Any], reply: Reply, finish: str) -> dict[str, Any]:
        """A chat completion reshaped as a text completion; a reasoning trace, which a raw
        completion has no field for, comes inline as ``<think>...</think>``."""
        text = reply.content
        if reply.reasoning is not None:
            text = f"<think>{reply.reasoning}</think>{text}"
        return {
            **chat,
            "id": chat["id"].replace("chatcmpl-", "cmpl-"),
            "object": "text_completion",
            "choices": [{"index": 0, "text": text, "finish_reason": finish}],
        }

    async def models(self, request: Request) -> Response:
        """``GET /v1/models``."""
        try:
            self.check_key(request)
        except ApiError as error:
            return error.response()
        data = [
            {
                "id": name,
                "object": "model",
                "created": CREATED,
                "owned_by": "fake-llm",
                "role": profile.role,
            }
            for name, profile in sorted(self.profiles.items())
        ]
        return _json({"object": "list", "data": data})

    async def get_stats(self, request: Request) -> Response:
        """``GET /stats``."""
        return _json(self.stats.as_json())

    async def reset_stats(self, request: Request) -> Response:
        """``POST /stats/reset``."""
        self.stats.reset()
        return _json(self.stats.as_json())

    async def patch_profile(self, request: Request) -> Response:
        """``PATCH /admin/profiles/{name}``: the changed profile's fields."""
        name = request.path_params["name"]
        if name not in self.profiles:
            return ApiError(404, f"No profile '{name}'.", code="profile_not_found").response()
        try:
            changes = json.loads(await request.body())
            self.profiles = merge_profiles({name: changes}, self.profiles, where="body")
        except (ValueError, UnicodeDecodeError) as error:
            return ApiError(400, str(error), code="invalid_profile").response()
        profile = self.profiles[name]
        return _json({f: getattr(profile, f) for f in profile.__slots__})


def create_app(config: ServerConfig | None = None) -> Starlette:
    """The ASGI app serving ``config`` (default: the built-in profiles, no answer key)."""
    provider = FakeProvider(config or ServerConfig())
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", provider.chat, methods=["POST"]),
            Route("/v1/completions", provider.text, methods=["POST"]),
            Route("/v1/models", provider.models, methods=["GET"]),
            Route("/stats", provider.get_stats, methods=["GET"]),
            Route("/stats/reset", provider.reset_stats, methods=["POST"]),
            Route("/admin/profiles/{name}", provider.patch_profile, methods=["PATCH"]),
        ]
    )
    app.state.provider = provider
    return app
