"""ASGI middleware that refuses hostile requests before the application reads them.

Every byte from a client is checked here once, for every route, present and future:

* a body larger than ``max_body_bytes`` is refused with 413: at once when its
  ``Content-Length`` says so (nothing is read), else as soon as the chunks read so far
  exceed it;
* a JSON body must be valid UTF-8, nested at most ``max_json_depth`` deep, and hold no
  string (key or value) with a NUL character or a lone surrogate (``"\\ud800"`` is valid
  JSON but no valid text: PostgreSQL and UTF-8 encoders refuse it); otherwise 422, naming
  the field's path, never echoing the value;
* a path or query parameter with a NUL character is refused with 400.

A body that is not JSON at all passes through: the application's own validation answers it
(422). What passes is handed on unchanged, so routes parse it as before.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from itertools import accumulate
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.api.outcomes import mark_client_closed, mark_refused
from server.api.problems import problem
from server.errors import BadRequest, ContentTooLarge, InvalidInput, ProctorError

MAX_REPORTED = 5
"""Problems named in one 422 (the rest are counted)."""


@dataclass(frozen=True, slots=True)
class BodyLimits:
    max_body_bytes: int
    max_json_depth: int


class BodyTooLarge(Exception):
    """The body exceeds the limit (raised while reading it)."""


class RequestGuard:
    """Refuses oversized bodies (413), hostile JSON (422) and NUL in the URL (400)."""

    def __init__(self, app: ASGIApp, *, limits: BodyLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = url_problem(scope)
        if refusal is not None:
            await _refuse(scope, send, BadRequest, detail=refusal)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limits.max_body_bytes:
            await self._too_large(scope, send)
            return
        try:
            body, connected = await _read_body(receive, self.limits.max_body_bytes)
        except BodyTooLarge:
            await self._too_large(scope, send)
            return
        if not connected:  # the client left mid-body: nobody to answer, nothing to do
            mark_client_closed(scope)
            return
        problems = (
            []
            if _is_multipart(scope)
            else body_problems(body, max_depth=self.limits.max_json_depth)
        )
        if problems:
            await _refuse(scope, send, InvalidInput, detail=_summary(problems))
            return
        await self.app(scope, _replay(body, receive), send)

    async def _too_large(self, scope: Scope, send: Send) -> None:
        await _refuse(
            scope,
            send,
            ContentTooLarge,
            detail=f"the request body exceeds {self.limits.max_body_bytes} bytes",
            headers={"Connection": "close"},
        )


def _is_multipart(scope: Scope) -> bool:
    """Whether the body is ``multipart/form-data`` (the console's file uploads): a file is
    bytes, not JSON text, and its reader reports bad encodings line by line itself."""
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            media_type: bytes = value.split(b";", 1)[0].strip().lower()
            return media_type == b"multipart/form-data"
    return False


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _read_body(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """The whole body (at most ``limit`` bytes, else ``BodyTooLarge``), and whether the
    client is still connected for more messages."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # disconnected: nothing to answer
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the already-read body once, then defers to the client."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def url_problem(scope: Scope) -> str | None:
    """Why the path or query string is refused, or None."""
    if "\x00" in scope.get("path", ""):
        return "the path contains a NUL character"
    query = scope.get("query_string", b"").decode("latin-1")
    for name, value in parse_qsl(query, keep_blank_values=True):
        if "\x00" in name or "\x00" in value:
            return f"query parameter {_printable(name)!r} contains a NUL character"
    return None


def body_problems(body: bytes, *, max_depth: int) -> list[str]:
    """What is wrong with a JSON body, as ``path: what`` strings (empty: acceptable, or not
    JSON at all, which the route's own validation reports).

    Bytes that are not UTF-8 are decoded as lone surrogates (``surrogateescape``) so that
    the field holding them can be named like one holding an escaped lone surrogate."""
    if not body.strip():
        return []
    if body.startswith(codecs.BOM_UTF8) or json.detect_encoding(body) != "utf-8":
        # json.loads(bytes), which the routes use, would decode these itself, unchecked
        return ["body: must be UTF-8 JSON without a byte-order mark (RFC 8259 §8.1)"]
    try:
        text = body.decode("utf-8")
        invalid_byte = None
    except UnicodeDecodeError as error:
        text = body.decode("utf-8", "surrogateescape")
        invalid_byte = error.start
    try:
        document = json.loads(text)
    except RecursionError:  # far deeper than any limit: find where without recursing
        return [f"{_deep_path(text, max_depth)}: JSON nested deeper than {max_depth} levels"]
    except ValueError:  # not JSON: the route says so, unless the bytes are the reason
        return [] if invalid_byte is None else [_not_utf8(invalid_byte)]
    if invalid_byte is None and not _needs_walk(text, max_depth):
        return []
    problems = _walk(document, max_depth=max_depth)
    if invalid_byte is not None and not problems:
        problems.append(_not_utf8(invalid_byte))
    return problems


_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
"""The only ways valid UTF-8 JSON text can carry a NUL or a lone surrogate: an escape."""
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _needs_walk(text: str, max_depth: int) -> bool:
    """Whether valid UTF-8 JSON ``text`` may hold a problem: a suspect escape, or nesting
    past ``max_depth``. Regular expressions and C-level iteration only, so the common
    body (and a huge flat one) is cleared without a Python loop over its elements."""
    if _SUSPECT_ESCAPE.search(text):
        return True
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if len(brackets) <= max_depth:
        return False
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets))) > max_depth


def _not_utf8(position: int) -> str:
    return f"body: not valid UTF-8 (byte {position})"


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]')
MAX_SCAN_TOKENS = 100_000


def _deep_path(text: str, max_depth: int) -> str:
    """The path of the first container nested ``max_depth`` deep in JSON ``text``, by a
    token scan (no recursion; gives up with ``body`` after ``MAX_SCAN_TOKENS`` tokens)."""
    path: list[str | int] = []
    expecting_key = False
    for count, match in enumerate(_TOKEN.finditer(text)):
        if count >= MAX_SCAN_TOKENS:
            break
        token = match.group()
        if token in ("[", "{"):
            if len(path) >= max_depth:
                break
            path.append(0 if token == "[" else "")
            expecting_key = token == "{"
        elif token in ("]", "}"):
            if path:
                path.pop()
        elif token == ",":
            if path and isinstance(path[-1], int):
                path[-1] += 1
            else:
                expecting_key = True
        elif token == ":":
            expecting_key = False
        elif expecting_key and path:
            path[-1] = _key_text(token)
    return "body" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _key_text(token: str) -> str:
    try:
        key = json.loads(token)
    except ValueError:
        key = token[1:-1]
    return str(key)


def _walk(document: Any, *, max_depth: int) -> list[str]:
    """Problems of every string and the nesting of ``document`` (iterative: no recursion).
    Only containers go on the stack and a path is built only where it is needed, so a flat
    array of a million numbers costs one quick pass."""
    if isinstance(document, str):
        what = text_problem(document)
        return [] if what is None else [f"body: {what}"]
    problems: list[str] = []
    stack: list[tuple[Any, str, int]] = [(document, "body", 0)]
    while stack:
        container, path, depth = stack.pop()
        if isinstance(container, str):
            if (what := text_problem(container)) is not None:
                problems.append(f"{path}: {what}")
            continue
        if depth >= max_depth:
            return [*problems, f"{path}: JSON nested deeper than {max_depth} levels"]
        if isinstance(container, dict):
            for key, child in container.items():
                if (what := text_problem(key)) is not None:
                    problems.append(f"{path}: a field name {what}")
                elif isinstance(child, str | dict | list):
                    stack.append((child, f"{path}.{key}", depth + 1))
            continue
        for index, child in enumerate(container):
            if isinstance(child, str | dict | list):
                stack.append((child, f"{path}[{index}]", depth + 1))
    return problems


def text_problem(value: str) -> str | None:
    """Why ``value`` is not acceptable text (NUL or a lone surrogate), or None."""
    if "\x00" in value:
        return "contains a NUL character"
    if value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8 text (a lone surrogate or an invalid byte)"
    return None


def _summary(problems: list[str]) -> str:
    shown = "; ".join(_printable(p) for p in problems[:MAX_REPORTED])
    rest = len(problems) - MAX_REPORTED
    return shown + (f"; and {rest} more" if rest > 0 else "")


def _printable(text: str, limit: int = 200) -> str:
    """``text`` safe to put in a response: no control characters, no surrogates, short."""
    return "".join(c if c.isprintable() else "?" for c in text[:limit])  # surrogates: not


async def _refuse(
    scope: Scope,
    send: Send,
    kind: type[ProctorError],
    *,
    detail: str,
    headers: dict[str, str] | None = None,
) -> None:
    mark_refused(scope, f"{kind.title}: {detail}")
    response = problem(
        Request(scope), status=kind.status, title=kind.title, detail=detail, headers=headers
    )
    await response(scope, _no_receive, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}
