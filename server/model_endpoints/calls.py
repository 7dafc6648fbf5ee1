"""Calling a model through its endpoint: the chat client the server builds for it (always
on the egress guard, so the URL a vendor gave cannot reach the server's own network) and
the endpoint check.

The prompt of a check is fixed and holds nothing of the bank.
"""

from __future__ import annotations

import time
from typing import cast

from clients.llm.chat import ChatClient, ChatEndpoint, Pricing, RetryPolicy
from clients.llm.failures import MODEL_CALL_ERRORS, failure_kind
from clients.runner.adapters import TemplateName, get_adapter, render_template
from clients.sdk.types import ModelApi
from server.config import Settings
from server.egress import guarded_transport
from server.model_endpoints.schemas import EndpointCheckOut
from server.model_endpoints.service import EndpointRecord, secret_headers

CHECK_PROMPT = "Reply with the single word OK."
CHECK_MAX_TOKENS = 16
CHECK_RETRY = RetryPolicy(max_attempts=2, max_wait_s=5.0)
REPLY_CHARS = 200


DEFAULT_RETRY = RetryPolicy()


def chat_client(
    record: EndpointRecord, settings: Settings, *, retry: RetryPolicy = DEFAULT_RETRY
) -> ChatClient:
    """A client for ``record``'s endpoint behind the guarded transport of ``settings``,
    with its secret headers, limits and the model's prices; the caller closes it."""
    endpoint = record.endpoint
    target = ChatEndpoint(
        base_url=endpoint.base_url,
        model=endpoint.model,
        temperature=endpoint.temperature,
        max_tokens=endpoint.max_tokens,
        stop=tuple(endpoint.stop),
        secret_headers=tuple(secret_headers(endpoint).items()),
        connect_timeout_s=endpoint.connect_timeout_s,
        read_timeout_s=endpoint.read_timeout_s,
    )
    pricing = Pricing(record.model.usd_per_mtok_in or 0.0, record.model.usd_per_mtok_out or 0.0)
    return ChatClient(
        target,
        retry=retry,
        concurrency=endpoint.concurrency,
        pricing=pricing,
        transport=guarded_transport(settings),
    )


async def check_endpoint(record: EndpointRecord, settings: Settings) -> EndpointCheckOut:
    """One small call to ``record``'s endpoint, shaped as a run's calls are (adapter,
    template); what came back or why nothing did, secrets redacted."""
    endpoint = record.endpoint
    messages = get_adapter(endpoint.adapter).messages(
        CHECK_PROMPT, system_prompt=endpoint.system_prompt
    )
    started = time.perf_counter()
    async with chat_client(record, settings, retry=CHECK_RETRY) as client:
        try:
            if endpoint.api == ModelApi.COMPLETIONS and endpoint.template is not None:
                raw = render_template(cast(TemplateName, endpoint.template), messages)
                reply = await client.complete_text(raw, max_tokens=CHECK_MAX_TOKENS)
            else:
                reply = await client.complete(messages, max_tokens=CHECK_MAX_TOKENS)
        except MODEL_CALL_ERRORS as error:
            return EndpointCheckOut(
                ok=False,
                latency_s=round(time.perf_counter() - started, 4),
                failure=failure_kind(error),
                detail=client.redact(f"{type(error).__name__}: {error}")[: REPLY_CHARS * 2],
                reply=None,
            )
    return EndpointCheckOut(
        ok=True,
        latency_s=round(reply.latency_s, 4),
        failure=None,
        detail=None,
        reply=reply.content[:REPLY_CHARS],
    )
