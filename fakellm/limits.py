"""What a real inference server's limits do to a request, so that our clients meet them in
tests: a prompt longer than the model's context, a model that refuses every call, replies
cut at ``max_tokens``, empty replies and a judge that rambles until it is stopped.

Each is a field of the profile (``fakellm.profiles.ModelProfile``):

* ``context_tokens``: prompt plus reply must fit; a longer prompt is refused with
  ``overflow_status``: 400 ``context_length_exceeded`` as OpenAI answers, or 500 as
  llama.cpp's server answered ("the request exceeds the available context size");
* ``reject_status``: every request is refused with this status (e.g. 400: a judge whose
  context is too small for any of our prompts);
* ``reply_mode``: ``answer`` (the profile's answer), ``empty`` (``""``) or ``endless``
  (filler until ``max_tokens`` or the context is full, whichever comes first);
* a reply longer than the request's ``max_tokens`` is cut there, with
  ``finish_reason: "length"``, as every OpenAI-compatible server does.

Pure functions of the profile, the messages and the request's ``max_tokens``.
"""

from __future__ import annotations

from dataclasses import replace

from fakellm.behaviour import Message, Reply, count_tokens
from fakellm.profiles import ModelProfile

ENDLESS_CAP_TOKENS = 32_768
"""How far an ``endless`` reply goes when neither ``max_tokens`` nor a context stops it."""
FILLER = "and on further reflection the matter deserves yet another careful look, "
CHARS_PER_TOKEN = 4
"""``behaviour.count_tokens`` counts four characters as a token."""


class LimitError(Exception):
    """The request is refused: ``status``, an OpenAI-style ``code`` and a message."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


def prompt_tokens(messages: list[Message]) -> int:
    return count_tokens("".join(m["content"] for m in messages))


def check_request(profile: ModelProfile, messages: list[Message]) -> None:
    """``LimitError`` if ``profile`` refuses the request outright (``reject_status``) or
    its prompt does not fit the context."""
    if profile.reject_status is not None:
        raise LimitError(
            profile.reject_status,
            f"The model '{profile.name}' refuses this request (a permanent limit).",
            "request_rejected",
        )
    if profile.context_tokens is None:
        return
    used = prompt_tokens(messages)
    if used > profile.context_tokens:
        raise LimitError(
            profile.overflow_status,
            f"This model's maximum context length is {profile.context_tokens} tokens; the "
            f"request has {used} (the request exceeds the available context size).",
            "context_length_exceeded",
        )


def shape_reply(
    profile: ModelProfile, reply: Reply, messages: list[Message], max_tokens: int | None
) -> tuple[Reply, str]:
    """The reply as the server sends it, and its ``finish_reason`` (``stop`` or
    ``length``)."""
    if profile.reply_mode == "empty":
        return Reply(""), "stop"
    room = _room(profile, messages, max_tokens)
    if profile.reply_mode == "endless":
        budget = ENDLESS_CAP_TOKENS if room is None else room
        text = (FILLER * (budget * CHARS_PER_TOKEN // len(FILLER) + 1))[: budget * CHARS_PER_TOKEN]
        return Reply(text), "length"
    if room is not None and count_tokens(reply.content + (reply.reasoning or "")) > room:
        cut = room * CHARS_PER_TOKEN
        return replace(reply, content=reply.content[:cut], reasoning=None), "length"
    return reply, "stop"


def _room(profile: ModelProfile, messages: list[Message], max_tokens: int | None) -> int | None:
    """Tokens the reply may take: ``max_tokens``, and what the context leaves."""
    limits = [max_tokens] if max_tokens is not None else []
    if profile.context_tokens is not None:
        limits.append(max(1, profile.context_tokens - prompt_tokens(messages)))
    return min(limits) if limits else None
