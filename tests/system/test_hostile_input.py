"""Hostile text in every body field, query parameter and path parameter of every route.

The routes come from the app's own OpenAPI document (``create_app(settings).openapi()``),
so a new route or field is fuzzed without touching this file; only a new request *body*
needs a valid example in ``BODIES`` (``test_every_body_route_has_a_valid_body`` says so).
Every request goes to the real app (lifespan included) on a seeded database, on SQLite and
PostgreSQL, with a fresh token of admin of organisation A and, on the routes vendors use,
of its vendor. One field at a time is replaced in a valid request by:

* NUL (``\\x00``), lone surrogates (``\\ud800``, ``\\udfff``, ``\\ud800`` followed by ``A``)
  sent as JSON escapes, as a real client sends them;
* invalid UTF-8 (``ff``, ``c3 28``, ``ed a0 80``) as raw bytes inside a JSON string;
* markup (``<script>``), an astral character (a valid surrogate pair: the control), a
  string one character over the place's ``maxLength`` (8,193 characters where none is
  declared), and 10,000 nested arrays (64 in a URL, where they are only text).

Body fields include nested ones (``usage.prompt_tokens``), list elements (``options[0]``, if
a body ever takes a list), an unknown field at every level and a hostile field *name*;
routes without a body get a stray one. In a URL the text is percent-encoded UTF-8 (a lone
surrogate as ``%ED%A0%80``, how a careless client encodes it).

Every response must be below 500, and every 4xx ``application/problem+json``. Beyond
that, what the hardening promises (``server/api/guard.py``, ``extra="forbid"``):

* a body with NUL, a lone surrogate, invalid UTF-8 or nesting deeper than
  ``max_json_depth`` anywhere, an unknown field, or text over the field's ``maxLength`` is
  refused with 422 whose problem names the field (413 is accepted for over-long text);
* NUL in the query string is refused with 400 or 422, text over a query parameter's
  ``maxLength`` with 422, and a hostile path id with a 4xx;
* anything else (``<script>`` as an answer, an unknown query parameter) may be accepted.

``test_hostile_text_everywhere`` sends every (field, value) combination once as admin, and
one value per class (``SECOND_ROLE_KINDS``) as vendor on the routes vendors use;
``test_hostile_text_variety`` adds hypothesis-drawn text around the same hostile kernels
(8 examples per route, 30 with the thorough profile of ``tests.support.profile``; no
shrinking: every failure of a run is collected and reported).
``test_oversized_*`` and ``test_json_depth_limit`` check the body limits on an app with
``max_body_bytes`` lowered to 64 KiB (fast) and ``max_json_depth`` lowered to 10, and the
depth limit on the default settings too.

``test_markup_and_astral_text_are_accepted`` checks the guard refuses nothing merely
unusual; ``test_every_text_field_of_a_body_is_bounded`` that free text always has a
``maxLength``. The PostgreSQL runs carry the ``postgres`` marker.

The app runs in its own event loop thread (an anyio blocking portal), so the tests and
hypothesis are plain synchronous code; the transport does not re-raise app exceptions, so a
500 is seen as the client would see it, and the exception the app logged is attached to
the failure.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, quote_from_bytes

import anyio.from_thread
import httpx
import hypothesis
import pytest
from hypothesis import strategies as st

from server.app import create_app
from server.config import Settings
from server.database import create_engine, unit_of_work
from server.health.service import refresh_health
from server.review.models import ReviewTask
from server.scoring.assignment import JudgeAssignment
from tests.server.calibration.support import seed_reviewed_answer
from tests.support.api import World, seed_world, test_settings
from tests.support.database import make_database_url
from tests.support.profile import examples

SPEC: dict[str, Any] = create_app(test_settings("sqlite+aiosqlite://")).openapi()
DEFAULT_DEPTH: int = Settings.model_fields["max_json_depth"].default
LIMITED_BODY = 64 * 1024
LIMITED_DEPTH = 10
MAX_EXAMPLES = examples(quick=8, thorough=30)
"""Hypothesis-drawn hostile texts per route (tests.support.profile)."""
DEEP = 10_000
URL_DEEP = 2 * DEFAULT_DEPTH
"""Nested brackets in a URL are only text; 10,000 of them would make a 60 KB URL."""
SECOND_ROLE_KINDS = frozenset(
    {"nul", "lone_high_surrogate", "utf8_ff", "markup", "overlong", "deep"}
)
"""The deterministic values vendors send too (one per class; admin sends them all)."""
UNBOUNDED_OVERLONG = 8_193
"""Over-long text where no ``maxLength`` is declared (a number, an id, an unknown field or
query parameter): past the usual 8 KiB request line (httpx refuses URLs over 64 KiB).
``test_every_text_field_of_a_body_is_bounded`` checks that free text always has one."""
FUZZ_ROLES = ("admin", "vendor")
EXTRA = "zz_unexpected"
MARKER = "__hostile_9f2c41__"
ANSWERS = "/v1/sessions/{session_id}/answers"
ENDPOINT = "/v1/models/{model_id}/endpoint"
DRIVE_ITEMS = 40
PROBLEM_JSON = "application/problem+json"
PATH_TYPES = ("string", "integer")
"""Path parameters that are fuzzed (ids: UUIDs, and the review queue's integer task ids)."""
SEEDED_PER_CELL = 30  # 3 disciplines x 2 types x 2 subdisciplines x 30 = 360 items


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Hostile:
    """A hostile value: text parts (``str``, JSON-escaped in a body) and raw bytes parts
    (``bytes``, put into the JSON string as they are), optionally wrapped in ``depth``
    nested arrays."""

    kind: str
    parts: tuple[str | bytes, ...]
    depth: int = 0

    @property
    def text(self) -> str:
        return "".join(p for p in self.parts if isinstance(p, str))

    @property
    def has_nul(self) -> bool:
        return "\x00" in self.text

    @property
    def has_lone_surrogate(self) -> bool:
        # adjacent high + low escapes decode to one character, so pair them up first
        merged = self.text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        return any(0xD800 <= ord(c) <= 0xDFFF for c in merged)

    @property
    def has_invalid_utf8(self) -> bool:
        return any(isinstance(p, bytes) for p in self.parts)

    def body_refusal(self, max_depth: int) -> str | None:
        """Why the guard must refuse this anywhere in a JSON body, or None."""
        reasons = [
            ("NUL", self.has_nul),
            ("lone surrogate", self.has_lone_surrogate),
            ("invalid UTF-8", self.has_invalid_utf8),
            (f"nested deeper than {max_depth}", self.depth > max_depth),
        ]
        found = [name for name, present in reasons if present]
        return ", ".join(found) if found else None

    def json_fragment(self) -> bytes:
        """The value as it appears in the JSON body (a string, or nested arrays of one)."""
        inner = b"".join(
            json.dumps(p).encode("ascii")[1:-1] if isinstance(p, str) else p for p in self.parts
        )
        return b"[" * self.depth + b'"' + inner + b'"' + b"]" * self.depth

    def url_fragment(self) -> str:
        """The value percent-encoded for a path segment or query (lone surrogates as their
        WTF-8 bytes, raw bytes as they are)."""
        raw = b"".join(
            p.encode("utf-8", "surrogatepass") if isinstance(p, str) else p for p in self.parts
        )
        return quote_from_bytes(b"[" * self.depth + raw + b"]" * self.depth, safe="")

    def label(self) -> str:
        size = sum(len(p) for p in self.parts)
        extra = f", depth {self.depth}" if self.depth else ""
        shown = "".join(p if isinstance(p, str) else f"<raw {p.hex(' ')}>" for p in self.parts)
        return f"{self.kind} ({size} chars{extra}): {shown[:40]!r}"


KERNELS: dict[str, tuple[str | bytes, ...]] = {
    "nul": ("\x00",),
    "lone_high_surrogate": ("\ud800",),
    "lone_low_surrogate": ("\udfff",),
    "high_surrogate_then_char": ("\ud800A",),
    "utf8_ff": (b"\xff",),
    "utf8_c3_28": (b"\xc3\x28",),
    "utf8_encoded_surrogate": (b"\xed\xa0\x80",),
    "markup": ("<script>alert(1)</script>",),
    "astral_char": ("\U0001f600",),  # a valid surrogate pair in JSON: must not be refused
}


def overlong_size(target: Target) -> int:
    """One character more than the place allows (or a fixed size if it declares no limit)."""
    if target.max_length is not None:
        return target.max_length + 1
    return UNBOUNDED_OVERLONG


def deterministic_values(target: Target) -> list[Hostile]:
    values = [Hostile(kind, ("a", *parts, "b")) for kind, parts in KERNELS.items()]
    values.append(Hostile("overlong", ("x" * overlong_size(target),)))
    values.append(Hostile("deep", ("x",), depth=URL_DEEP if target.in_url else DEEP))
    return values


@st.composite
def hostile_values(draw: st.DrawFn, target: Target) -> Hostile:
    """A hostile kernel with random text around it (hypothesis' text may add NUL too)."""
    kind = draw(st.sampled_from([*KERNELS, "overlong", "deep"]))
    prefix = draw(st.text(max_size=12))
    suffix = draw(st.text(max_size=12))
    if kind == "overlong":
        return Hostile(kind, (prefix, "x" * overlong_size(target), suffix))
    if kind == "deep":
        deepest = URL_DEEP if target.in_url else DEEP
        depth = draw(st.one_of(st.just(DEFAULT_DEPTH + 1), st.integers(DEFAULT_DEPTH + 1, deepest)))
        return Hostile(kind, (prefix, suffix), depth=depth)
    repeat = draw(st.integers(1, 3))
    return Hostile(kind, (prefix, *(KERNELS[kind] * repeat), suffix))


# --------------------------------------------------------------------------- routes


@dataclass(frozen=True)
class Target:
    """Where the hostile value goes."""

    place: str
    """``body`` (a field), ``key`` (a field name), ``stray`` (a body on a route without
    one), ``query``, ``query_name`` or ``path``."""
    name: str
    path: tuple[str | int, ...] = ()
    known: bool = True
    """False for a field or parameter the route does not declare."""
    max_length: int | None = None
    """The declared ``maxLength`` of a text field or parameter."""
    free_text: bool = False
    """A string without enum, format or pattern: only ``maxLength`` bounds it."""

    @property
    def in_url(self) -> bool:
        return self.place in ("query", "query_name", "path")

    @property
    def leaf(self) -> str | None:
        """The field name a 422 must mention."""
        names = [p for p in self.path if isinstance(p, str)]
        return names[-1] if names else None


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SPEC["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    options = [_resolve(s) for s in schema.get("anyOf", ())]
    concrete = [s for s in options if s.get("type") != "null"]
    return concrete[0] if len(concrete) == 1 else schema


def _dotted(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def body_targets(schema: dict[str, Any], prefix: tuple[str | int, ...] = ()) -> Iterator[Target]:
    """Every field (nested objects and list elements too) and an unknown one per level."""
    schema = _resolve(schema)
    for name, sub in schema.get("properties", {}).items():
        path = (*prefix, name)
        inner = _resolve(sub)
        free = inner.get("type") == "string" and not {"enum", "format", "pattern"} & set(inner)
        yield Target("body", _dotted(path), path, max_length=inner.get("maxLength"), free_text=free)
        if "properties" in inner:
            yield from body_targets(inner, path)
        if inner.get("type") == "array":
            element = (*path, 0)
            yield Target("body", _dotted(element), element)
            if "properties" in _resolve(inner.get("items", {})):
                yield from body_targets(inner["items"], element)
    extra = (*prefix, EXTRA)
    yield Target("body", _dotted(extra), extra, known=False)
    if not prefix:
        yield Target("key", "<hostile field name>", (), known=False)


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    path_params: tuple[str, ...]
    query_params: tuple[tuple[str, dict[str, Any]], ...]
    """Names and schemas."""
    body: dict[str, Any] | None

    @property
    def id(self) -> str:
        return f"{self.method} {self.path}"

    @functools.cached_property
    def targets(self) -> tuple[Target, ...]:
        found: list[Target] = []
        if self.body is not None:
            found.extend(body_targets(self.body))
        elif self.method in ("POST", "PUT", "PATCH"):
            found.append(Target("stray", f"<stray body>.{EXTRA}", (EXTRA,), known=False))
        found.extend(
            Target("query", name, (name,), max_length=_resolve(schema).get("maxLength"))
            for name, schema in self.query_params
        )
        found.append(Target("query", f"?{EXTRA}", (EXTRA,), known=False))
        found.append(Target("query_name", "<hostile query name>", known=False))
        found.extend(Target("path", p, (p,)) for p in self.path_params)
        return tuple(found)


def routes_of(spec: dict[str, Any]) -> list[Route]:
    out = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            params = operation.get("parameters", [])
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            out.append(
                Route(
                    method=method.upper(),
                    path=path,
                    path_params=tuple(
                        p["name"]
                        for p in params
                        if p["in"] == "path" and _resolve(p["schema"]).get("type") in PATH_TYPES
                    ),
                    query_params=tuple(
                        (p["name"], p["schema"]) for p in params if p["in"] == "query"
                    ),
                    body=body["schema"] if body else None,
                )
            )
    return out


ROUTES = routes_of(SPEC)


# --------------------------------------------------------------------------- valid bodies

BodyFactory = Callable[["Env", str], dict[str, Any]]

BODIES: dict[tuple[str, str], BodyFactory] = {
    ("POST", "/v1/auth/token"): lambda env, role: {"api_key": env.world.a.keys[role]},
    ("POST", "/v1/admin/tokens/revoke"): lambda env, role: {"jti": uuid.uuid4().hex},
    ("POST", "/v1/models"): lambda env, role: {
        "name": f"probe-{uuid.uuid4().hex[:12]}",
        "api_snapshot": "2026-11-01",
        "family": "probe",
        "params_b": 7.0,
        "usd_per_mtok_in": 1.0,
        "usd_per_mtok_out": 2.0,
        **({"org": env.world.a.name} if role == "admin" else {}),  # admins only
    },
    # nothing is called on a PUT; port 9 (discard) is never listened on here
    ("PUT", ENDPOINT): lambda env, role: {
        "base_url": "http://127.0.0.1:9/v1",
        "model": "probe",
        "stop": ["</s>"],
        "secret_headers": {"Authorization": "Bearer sk-probe-0123456789"},
    },
    # the model's endpoint is set first (``Env.base``); no worker drives runs here
    ("POST", "/v1/runs"): lambda env, role: {"model_id": str(env.world.a.model_id)},
    ("POST", "/v1/sessions"): lambda env, role: {
        "model_id": str(env.world.a.model_id),
        **({"n_items": 1} if role == "admin" else {}),  # vendors get the default (1 here)
        "mode": "adaptive",
        "adaptive": {
            "policy": "uniform",
            "bound": "normal",
            "target_halfwidth": 10.0,
            "delta": 0.05,
        },
    },
    # position and item_id are the pending item's, filled in by ``Env.base``
    ("POST", ANSWERS): lambda env, role: {
        "position": 0,
        "item_id": str(uuid.uuid4()),
        "answer": "B",
        "reasoning": "because",
        "usage": {"prompt_tokens": 812, "completion_tokens": 95},
    },
    ("PUT", "/v1/admin/leaderboard/anchor"): lambda env, role: {
        "model_id": str(env.world.a.model_id)
    },
    # the path's item is a fresh active one each time (``Env.active_item``)
    ("POST", "/v1/admin/bank/items/{item_id}/review"): lambda env, role: {
        "action": "retire",
        "note": "probe",
    },
    ("POST", "/v1/admin/bank/item-sets"): lambda env, role: {
        "name": f"probe-{uuid.uuid4().hex[:12]}",
        "item_ids": [env.active_item()],
        "rule": {"subset": "cas", "retention": 0.25},
    },
    # the path's task is ``Env.review_task`` (scored by the first valid request; later
    # valid scores are 409, which the fuzz allows)
    ("POST", "/v1/review/tasks/{task_id}/score"): lambda env, role: {
        "score": 2,
        "note": "probe",
    },
    # the review queue has a human-scored answer (``seed_reviewed_answer``)
    ("POST", "/v1/admin/calibration-sets"): lambda env, role: {"name": "probe-set"},
}


def _set(document: Any, path: tuple[str | int, ...], value: Any) -> None:
    for i, part in enumerate(path):
        last = i == len(path) - 1
        if isinstance(part, int):
            assert isinstance(document, list)
            while len(document) <= part:
                document.append(None)
        if last:
            document[part] = value
            return
        child = document[part] if isinstance(part, int) else document.get(part)
        if not isinstance(child, dict | list):
            child = [] if isinstance(path[i + 1], int) else {}
            document[part] = child
        document = child


def _encode(body: dict[str, Any], value: Hostile) -> bytes:
    encoded = json.dumps(body).encode("ascii")
    quoted = json.dumps(MARKER).encode("ascii")
    assert encoded.count(quoted) == 1
    return encoded.replace(quoted, value.json_fragment())


# --------------------------------------------------------------------------- the app


class LogCapture(logging.Handler):
    """What the app logged at WARNING and above while one request ran."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            self.records.append(f"{type(error).__name__}: {str(error)[:300]}")
        else:
            self.records.append(f"{record.levelname} {record.name}: {record.getMessage()[:300]}")


@asynccontextmanager
async def _serve(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(
            app=app, raise_app_exceptions=False, client=("127.0.0.1", 50000)
        )
        async with httpx.AsyncClient(
            transport=transport, base_url="http://proctor.test", timeout=None
        ) as client:
            yield client


class LiveApp:
    """The app with its lifespan in an event loop thread of its own; synchronous calls."""

    def __init__(self, settings: Settings) -> None:
        self._stack = ExitStack()
        self.portal = self._stack.enter_context(anyio.from_thread.start_blocking_portal())
        self.client: httpx.AsyncClient = self._stack.enter_context(
            self.portal.wrap_async_context_manager(_serve(settings))
        )
        self.log = LogCapture()
        logging.getLogger("server").addHandler(self.log)

    def close(self) -> None:
        logging.getLogger("server").removeHandler(self.log)
        self._stack.close()

    def request(
        self, method: str, url: str, *, content: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[httpx.Response, list[str]]:
        """The response and what the app logged while producing it."""
        self.log.records.clear()
        call = functools.partial(self.client.request, method, url, content=content, headers=headers)
        response = self.portal.call(call)
        return response, list(self.log.records)

    def streamed(
        self, method: str, url: str, *, chunks: int, chunk_size: int, headers: dict[str, str]
    ) -> tuple[httpx.Response, int]:
        """Send a body of ``chunks`` chunks from a generator (chunked unless ``headers``
        has a Content-Length); the response and how many chunks the app pulled."""
        pulled = 0

        async def body() -> AsyncIterator[bytes]:
            nonlocal pulled
            for _ in range(chunks):
                pulled += 1
                yield b" " * chunk_size

        async def call() -> httpx.Response:
            return await self.client.request(method, url, content=body(), headers=headers)

        response = self.portal.call(call)
        return response, pulled


@dataclass
class Failure:
    cause: str
    route: str
    target: str
    value: str
    role: str
    status: int
    detail: str
    logged: list[str]

    def line(self) -> str:
        logged = f" | server log: {'; '.join(self.logged)[:400]}" if self.logged else ""
        return (
            f"{self.route} [{self.target}] {self.value} as {self.role} -> {self.status}: "
            f"{self.detail[:200]}{logged}"
        )


def report(failures: list[Failure], limit: int = 60) -> str:
    groups: dict[str, list[Failure]] = defaultdict(list)
    for failure in failures:
        groups[failure.cause].append(failure)
    lines = [f"{len(failures)} failures"]
    for cause, members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"== {cause}: {len(members)}")
        lines.extend(f"   {m.line()}" for m in members[:limit])
        if len(members) > limit:
            lines.append(f"   ... and {len(members) - limit} more")
    return "\n".join(lines)


@dataclass
class Env:
    """One backend's running app, tokens, sessions and tallies."""

    backend: str
    world: World
    app: LiveApp
    max_depth: int
    headers: dict[str, dict[str, str]] = field(default_factory=dict)
    drive: dict[str, str] = field(default_factory=dict)
    pending_items: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    """The last pending item seen per role, until a request may have answered it."""
    abort_sessions: dict[tuple[str, str], str] = field(default_factory=dict)
    """A one-item session per abort route and role (opened when first needed), so that
    each route's valid request finds an open session to abort."""
    db_url: str = ""
    task_id: int | None = None
    """The open review task of the review routes (``review_task``)."""
    roles: dict[str, tuple[str, ...]] = field(default_factory=dict)
    sent: int = 0
    helpers: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    failures: list[Failure] = field(default_factory=list)
    non_problem: set[tuple[str, int, str]] = field(default_factory=set)
    echoes: set[tuple[str, str]] = field(default_factory=set)
    started: float = field(default_factory=time.monotonic)

    # helpers (not counted as fuzzing) -------------------------------------------------

    def helper(
        self, method: str, url: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        self.helpers += 1
        content = json.dumps(body).encode() if body is not None else None
        hdrs = {"content-type": "application/json", **(headers or {})}
        response, _ = self.app.request(method, url, content=content, headers=hdrs)
        return response

    def login(self, role: str) -> dict[str, str]:
        response = self.helper("POST", "/v1/auth/token", {"api_key": self.world.a.keys[role]})
        assert response.status_code == 200, response.text
        return {"Authorization": f"Bearer {response.json()['access_token']}"}

    def open_session(self, n_items: int) -> str:
        body = {"model_id": str(self.world.a.model_id), "n_items": n_items}
        response = self.helper("POST", "/v1/sessions", body, self.headers["admin"])
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def abort_session(self, path: str, role: str) -> str:
        if (path, role) not in self.abort_sessions:
            self.abort_sessions[path, role] = self.open_session(1)
        return self.abort_sessions[path, role]

    def pending(self, role: str) -> tuple[str, int, str]:
        """The role's driving session and its pending item (a new session when done)."""
        if role in self.pending_items:
            return self.pending_items[role]
        for _ in range(3):
            session = self.drive[role]
            response = self.helper("GET", f"/v1/sessions/{session}/next", None, self.headers[role])
            if response.status_code == 200:
                item = response.json()
                self.pending_items[role] = (session, item["position"], item["item_id"])
                return self.pending_items[role]
            assert response.status_code in (204, 409), response.text
            self.drive[role] = self.open_session(DRIVE_ITEMS)
        raise AssertionError("no pending item to answer")

    def set_endpoint(self, role: str) -> None:
        """The model has an endpoint (a DELETE probed before may have removed it)."""
        path = ENDPOINT.replace("{model_id}", str(self.world.a.model_id))
        body = BODIES[("PUT", ENDPOINT)](self, role)
        response = self.helper("PUT", path, body, self.headers[role])
        assert response.status_code == 200, response.text

    def run_to(self, action: str, role: str) -> str:
        """A fresh run of the role's organisation that ``action`` (pause, resume, cancel)
        may move (a paused one to resume)."""
        self.set_endpoint(role)
        body = {"model_id": str(self.world.a.model_id)}
        started = self.helper("POST", "/v1/runs", body, self.headers[role])
        assert started.status_code == 201, started.text
        run_id = str(started.json()["id"])
        if action == "resume":
            paused = self.helper("POST", f"/v1/runs/{run_id}/pause", None, self.headers[role])
            assert paused.status_code == 200, paused.text
        return run_id

    def calibration_set(self) -> str:
        """A calibration set's id (``seed_reviewed_answer`` froze one)."""
        response = self.helper("GET", "/v1/admin/calibration-sets", None, self.headers["admin"])
        assert response.status_code == 200 and response.json(), response.text
        return str(response.json()[0]["id"])

    def active_item(self) -> str:
        """An active item of the bank (the newest by id; a retired one gives way)."""
        response = self.helper(
            "GET", "/v1/admin/bank/items?status=active&limit=1", None, self.headers["admin"]
        )
        assert response.status_code == 200 and response.json(), response.text
        return str(response.json()[0]["id"])

    def review_task(self) -> int:
        """A review task of an answer of the admin's session (written once, as scoring
        would open it)."""
        if self.task_id is None:
            session, position, item_id = self.pending("admin")
            answer = {"position": position, "item_id": item_id, "answer": "B"}
            posted = self.helper(
                "POST", f"/v1/sessions/{session}/answers", answer, self.headers["admin"]
            )
            self.pending_items.pop("admin", None)
            assert posted.status_code == 201, posted.text
            self.task_id = self.app.portal.call(_open_task, self.db_url, session, position)
        return self.task_id

    # requests -------------------------------------------------------------------------

    def base(self, route: Route, role: str) -> tuple[dict[str, str], dict[str, Any] | None]:
        """Path parameters and body of a valid request of ``role`` on ``route``."""
        values: dict[str, str] = {}
        for name in route.path_params:
            if name == "model_id":
                values[name] = str(self.world.a.model_id)
            elif name == "session_id" and route.path.endswith("/abort"):
                values[name] = self.abort_session(route.path, role)
            elif name == "session_id":
                values[name] = self.drive[role]
            elif name == "item_id":
                values[name] = self.active_item()
            elif name == "task_id":
                values[name] = str(self.review_task())
            elif name == "set_id":
                values[name] = self.calibration_set()
            elif name == "run_id":
                values[name] = self.run_to(route.path.rsplit("/", 1)[-1], role)
            else:
                raise AssertionError(f"no valid value for path parameter {name} of {route.id}")
        if (route.path.startswith(ENDPOINT) and route.method != "PUT") or route.path == "/v1/runs":
            self.set_endpoint(role)
        body = None
        if route.body is not None:
            body = BODIES[(route.method, route.path)](self, role)
        if route.path == ANSWERS and body is not None:
            values["session_id"], body["position"], body["item_id"] = self.pending(role)
        return values, body

    def auth(self, route: Route, role: str) -> dict[str, str]:
        if route.path == "/v1/auth/token":
            return {}
        if route.path == "/v1/auth/refresh":  # a refresh revokes the token it is given
            return self.login(role)
        return self.headers[role]

    def build(
        self, route: Route, role: str, target: Target | None, value: Hostile | None
    ) -> tuple[str, bytes | None]:
        values, body = self.base(route, role)
        url = route.path
        for name, raw in values.items():
            hostile = target is not None and target.place == "path" and target.name == name
            assert value is not None or not hostile
            segment = value.url_fragment() if hostile and value else quote(raw, safe="")
            url = url.replace("{" + name + "}", segment)
        if target is not None and value is not None:
            if target.place == "query":
                url += f"?{quote(str(target.path[0]), safe='')}={value.url_fragment()}"
            elif target.place == "query_name":
                url += f"?{value.url_fragment()}=1"
        content = None
        if target is not None and value is not None and target.place in ("body", "key", "stray"):
            document = copy.deepcopy(body) if body is not None else {}
            if target.place == "key":
                document[MARKER] = 1
            else:
                _set(document, target.path, MARKER)
            content = _encode(document, value)
        elif body is not None:
            content = json.dumps(body).encode()
        return url, content

    def probe(self, route: Route, target: Target, value: Hostile, role: str) -> list[Failure]:
        url, content = self.build(route, role, target, value)
        headers = {**self.auth(route, role)}
        if content is not None:
            headers["content-type"] = "application/json"
        began = time.monotonic()
        response, logged = self.app.request(route.method, url, content=content, headers=headers)
        self.seconds[value.kind] += time.monotonic() - began
        self.seconds[route.id] += time.monotonic() - began
        self.sent += 1
        self.statuses[response.status_code] += 1
        if route.path == ANSWERS and response.status_code not in (400, 404, 413, 422):
            self.pending_items.pop(role, None)  # answered, or the session moved on
        found = self.check(route, target, value, role, response, logged)
        self.failures.extend(found)
        return found

    # expectations ---------------------------------------------------------------------

    def expected(self, target: Target, value: Hostile) -> tuple[frozenset[int] | None, str]:
        """The statuses the response must have (None: any 2xx or 4xx), and why."""
        if target.place == "path":
            return frozenset(range(400, 500)), "a hostile path id is never a valid one"
        too_long = target.max_length is not None and len(value.text) > target.max_length
        if target.in_url:
            if value.has_nul:
                return frozenset({400, 422}), "NUL in the query string"
            if too_long:
                return frozenset({422}), f"longer than maxLength {target.max_length}"
            return None, ""
        refusal = value.body_refusal(self.max_depth)
        if refusal:
            return frozenset({422}), f"{refusal} in a JSON body"
        if target.place == "stray":
            return None, ""
        if not target.known:
            return frozenset({422}), "unknown field (extra='forbid')"
        if too_long:
            return frozenset({413, 422}), f"longer than maxLength {target.max_length}"
        return None, ""

    def check(
        self,
        route: Route,
        target: Target,
        value: Hostile,
        role: str,
        response: httpx.Response,
        logged: list[str],
    ) -> list[Failure]:
        status = response.status_code
        text = response.text
        out: list[Failure] = []

        def fail(cause: str, detail: str) -> None:
            out.append(
                Failure(cause, route.id, target.name, value.label(), role, status, detail, logged)
            )

        required, why = self.expected(target, value)
        redirect = target.place == "path" and status in (307, 308)  # a "/" in the id
        if status >= 500:
            fail(f"server error {status}", text)
        elif required is not None and status not in required and not redirect:
            if 200 <= status < 300:
                fail(f"accepted although {why}", text)
            else:
                fail(f"{status} instead of {sorted(required)[:3]} ({why})", text)
        elif required is None and not (200 <= status < 300 or 400 <= status < 500):
            fail(f"unexpected status {status}", text)
        if status >= 400:
            media = response.headers.get("content-type", "")
            try:
                payload = response.json()
            except ValueError:
                payload = None
            if not media.startswith(PROBLEM_JSON) or not isinstance(payload, dict):
                self.non_problem.add((route.id, status, media))
                fail("error response is not problem+json", f"{media}: {text}")
            elif payload.get("status") != status:
                fail("problem+json status differs from the HTTP status", text)
            if "<script" in text and value.kind == "markup":
                self.echoes.add((route.id, target.name))
        body_refusal = target.place in ("body", "stray") and (
            value.body_refusal(self.max_depth) or not target.known
        )
        if status == 422 and body_refusal and target.leaf and target.leaf not in text:
            fail("422 does not name the field", text)
        if 200 <= status < 300 and status != 204 and not is_json_body(response):
            fail("2xx response is not JSON", text)
        return out

    def summary(self) -> str:
        elapsed = time.monotonic() - self.started
        statuses = dict(sorted(self.statuses.items()))
        lines = [
            f"hostile input [{self.backend}]: {self.sent} fuzz requests "
            f"(+{self.helpers} helper requests) in {elapsed:.1f}s; statuses {statuses}",
        ]
        ranked = sorted(self.seconds.items(), key=lambda kv: -kv[1])[:12]
        slowest = ", ".join(f"{k} {v:.1f}s" for k, v in ranked)
        lines.append(f"  slowest: {slowest}")
        if self.non_problem:
            lines.append(f"  4xx/5xx not problem+json: {sorted(self.non_problem)}")
        if self.echoes:
            lines.append(f"  <script> echoed in an error response: {sorted(self.echoes)}")
        if self.failures:
            lines.append(report(self.failures, limit=1000))
        return "\n".join(lines)


async def _open_task(db_url: str, session: str, position: int) -> int:
    engine = create_engine(db_url)
    try:
        async with unit_of_work(engine) as db:
            task = ReviewTask(
                session_id=uuid.UUID(session),
                position=position,
                reason="needs_review",
                discipline="probe",
                required=1,
                state="open",
            )
            db.add(task)
            await db.flush()
            return task.id
    finally:
        await engine.dispose()


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def backend(request: pytest.FixtureRequest) -> str:
    """This module's own backend parameter: its PostgreSQL runs carry the marker."""
    return str(request.param)


@pytest.fixture(scope="module")
async def hostile_db(
    backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, World, str | None]:
    db_url = await make_database_url(backend, request, tmp_path_factory.mktemp("hostile"))
    world = await seed_world(db_url, per_cell=SEEDED_PER_CELL)
    engine = create_engine(db_url)
    try:  # a (still empty) health snapshot, so the health routes have something to read
        await refresh_health(
            engine, judges=JudgeAssignment(), population="all", min_new_verdicts=0, flag=False
        )
    finally:
        await engine.dispose()
    await seed_reviewed_answer(db_url, world)  # for the calibration-set routes
    redis_url = request.getfixturevalue("redis_server").url if backend == "postgres" else None
    return db_url, world, redis_url


def _settings(db_url: str, redis_url: str | None, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "lease_idle_s": 0.001,  # admin and vendor tokens drive sessions of one organisation
        "default_session_items": 1,  # vendors' sessions
        "max_concurrent_sessions": 100_000,
        "max_sessions_per_period": 100_000,
        "rate_limit_org_per_minute": 1_000_000,
        "auth_failures_per_minute": 1_000_000,  # hostile api_keys are refused logins
        "leaderboard_resamples": 100,
    }
    values.update(overrides)
    return test_settings(db_url, redis_url, **values)


@pytest.fixture(scope="module")
def env(backend: str, hostile_db: tuple[str, World, str | None]) -> Iterator[Env]:
    """The app on default body limits, tokens of admin and vendor, sessions to drive, and
    the roles that may call each route (admin always; vendor where its valid request is
    accepted)."""
    db_url, world, redis_url = hostile_db
    settings = _settings(db_url, redis_url)
    app = LiveApp(settings)
    state = Env(backend, world, app, max_depth=settings.max_json_depth, db_url=db_url)
    try:
        for role in FUZZ_ROLES:
            state.headers[role] = state.login(role)
        for role in FUZZ_ROLES:
            state.drive[role] = state.open_session(DRIVE_ITEMS)
        baseline_failures = []
        for route in ROUTES:
            allowed = []
            for role in FUZZ_ROLES:
                url, content = state.build(route, role, None, None)
                headers = {**state.auth(route, role), "content-type": "application/json"}
                response, logged = app.request(route.method, url, content=content, headers=headers)
                state.helpers += 1
                state.pending_items.pop(role, None)
                if 200 <= response.status_code < 300:
                    allowed.append(role)
                elif role == "admin" or response.status_code not in (401, 403):
                    baseline_failures.append(
                        f"{route.id} as {role}: {response.status_code} {response.text[:300]} "
                        f"{logged}"
                    )
            state.roles[route.id] = tuple(allowed)
        assert not baseline_failures, "valid requests refused:\n" + "\n".join(baseline_failures)
        yield state
    finally:
        print("\n" + state.summary())
        app.close()


@pytest.fixture(scope="module")
def limited(hostile_db: tuple[str, World, str | None]) -> Iterator[tuple[LiveApp, World]]:
    """The app with ``max_body_bytes`` 64 KiB and ``max_json_depth`` 10."""
    db_url, world, redis_url = hostile_db
    app = LiveApp(
        _settings(db_url, redis_url, max_body_bytes=LIMITED_BODY, max_json_depth=LIMITED_DEPTH)
    )
    try:
        yield app, world
    finally:
        app.close()


# --------------------------------------------------------------------------- tests


def test_every_body_route_has_a_valid_body() -> None:
    for parts in KERNELS.values():  # each raw-bytes kernel is invalid UTF-8 on its own
        for part in parts:
            if isinstance(part, bytes):
                with pytest.raises(UnicodeDecodeError):
                    part.decode("utf-8")
    with_body = {(r.method, r.path) for r in ROUTES if r.body is not None}
    assert with_body == set(BODIES), "add (or drop) a valid example body in BODIES"
    assert ROUTES and all(r.targets for r in ROUTES)


def test_list_elements_and_nested_fields_are_targets() -> None:
    """No body takes a list today; the walker would reach its elements if one did."""
    schema = {
        "type": "object",
        "properties": {
            "options": {"type": "array", "items": {"type": "string", "maxLength": 5}},
            "usage": {"anyOf": [{"type": "object", "properties": {"n": {}}}, {"type": "null"}]},
        },
    }
    names = [t.name for t in body_targets(schema)]
    assert names == [
        "options",
        "options[0]",
        "usage",
        "usage.n",
        f"usage.{EXTRA}",
        EXTRA,
        "<hostile field name>",
    ]
    document: dict[str, Any] = {"usage": None}
    _set(document, ("options", 0), MARKER)
    _set(document, ("usage", "n"), 1)
    assert document == {"options": [MARKER], "usage": {"n": 1}}
    value = Hostile("utf8_ff", ("a", b"\xff"))
    assert _encode({"options": [MARKER]}, value) == b'{"options": ["a\xff"]}'


def test_every_text_field_of_a_body_is_bounded() -> None:
    """Every string a request body takes has a ``maxLength`` (else nothing bounds it but
    the body limit)."""
    unbounded = [
        f"{route.id} {target.name}"
        for route in ROUTES
        for target in route.targets
        if target.place == "body" and target.free_text and target.max_length is None
    ]
    assert not unbounded, f"text fields without maxLength: {unbounded}"


@pytest.mark.parametrize("route", ROUTES, ids=[r.id for r in ROUTES])
def test_hostile_text_everywhere(env: Env, route: Route) -> None:
    """Every target of the route with every deterministic hostile value, per role."""
    failures: list[Failure] = []
    for target in route.targets:
        for value in deterministic_values(target):
            if target.place == "key" and value.depth:
                continue  # a field name cannot be an array
            for role in env.roles[route.id]:
                if role == "admin" or value.kind in SECOND_ROLE_KINDS:
                    failures.extend(env.probe(route, target, value, role))
    assert not failures, report(failures)


@pytest.mark.parametrize("route", ROUTES, ids=[r.id for r in ROUTES])
def test_hostile_text_variety(env: Env, route: Route) -> None:
    """Hypothesis varies the text around the hostile kernels (no shrinking: every failure
    of the run is collected and reported at the end)."""
    failures: list[Failure] = []
    roles = env.roles[route.id]

    @hypothesis.settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    @hypothesis.given(data=st.data())
    def run(data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(route.targets), label="target")
        value = data.draw(hostile_values(target), label="value")
        role = data.draw(st.sampled_from(roles), label="role")
        if target.place == "key" and value.depth:
            value = replace(value, depth=0)
        failures.extend(env.probe(route, target, value, role))

    run()
    assert not failures, report(failures)


def test_markup_and_astral_text_are_accepted(env: Env) -> None:
    """The guard must not refuse what is merely unusual: markup and a surrogate pair."""
    text = "<script>alert(1)</script> \U0001f600 \u2028 caf\u00e9"
    admin = env.headers["admin"]
    model = {"name": text, "api_snapshot": text, "family": "f"}
    registered = env.helper("POST", "/v1/models", model, admin)
    assert registered.status_code == 201, registered.text
    assert registered.json()["name"] == text
    session, position, item_id = env.pending("admin")
    answer = {"position": position, "item_id": item_id, "answer": text, "reasoning": text}
    accepted = env.helper("POST", f"/v1/sessions/{session}/answers", answer, admin)
    env.pending_items.pop("admin", None)
    assert accepted.status_code == 201, accepted.text


def _assert_problem(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON), response.headers
    assert response.json()["status"] == status


def json_headers_for(app: LiveApp, world: World, path: str) -> dict[str, str]:
    """JSON request headers for ``path``: with an admin's bearer token unless ``path`` is the
    token exchange itself."""
    headers = {"content-type": "application/json"}
    if path != "/v1/auth/token":
        login = json.dumps({"api_key": world.a.keys["admin"]})
        token, _ = app.request("POST", "/v1/auth/token", content=login, headers=headers)
        headers["Authorization"] = f"Bearer {token.json()['access_token']}"
    return headers


@pytest.mark.parametrize("path", ["/v1/auth/token", "/v1/models"])
def test_oversized_body_with_content_length_is_refused_unread(
    limited: tuple[LiveApp, World], path: str
) -> None:
    app, world = limited
    headers = json_headers_for(app, world, path)
    chunks, size = 16, 8 * 1024  # 128 KiB
    declared = {**headers, "content-length": str(chunks * size)}
    response, pulled = app.streamed("POST", path, chunks=chunks, chunk_size=size, headers=declared)
    _assert_problem(response, 413)
    assert pulled == 0, f"the app read {pulled} chunks of a body it refuses by its length"
    # one byte over, in one piece
    whole, _ = app.request("POST", path, content=b" " * (LIMITED_BODY + 1), headers=headers)
    _assert_problem(whole, 413)


@pytest.mark.parametrize("path", ["/v1/auth/token", "/v1/models"])
def test_oversized_chunked_body_is_refused(limited: tuple[LiveApp, World], path: str) -> None:
    app, world = limited
    headers = json_headers_for(app, world, path)
    chunks, size = 128, 8 * 1024  # 1 MiB, no Content-Length
    response, pulled = app.streamed("POST", path, chunks=chunks, chunk_size=size, headers=headers)
    _assert_problem(response, 413)
    assert pulled <= LIMITED_BODY // size + 2, f"read {pulled} of {chunks} chunks before refusing"


def test_body_at_the_limit_is_read(limited: tuple[LiveApp, World]) -> None:
    app, _ = limited
    body = {"api_key": "pk_unknown", EXTRA: ""}
    padding = LIMITED_BODY - len(json.dumps(body).encode())
    body[EXTRA] = "x" * padding
    content = json.dumps(body).encode()
    assert len(content) == LIMITED_BODY
    headers = {"content-type": "application/json"}
    response, logged = app.request("POST", "/v1/auth/token", content=content, headers=headers)
    assert response.status_code == 422, (response.text, logged)  # unknown field, not 413


def _nested(depth: int, kind: str) -> bytes:
    if kind == "arrays":
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"a":' * (depth - 1) + b'{"a":1}' + b"}" * (depth - 1)


@pytest.mark.parametrize("kind", ["arrays", "objects"])
@pytest.mark.parametrize("limit", ["default", "lowered"])
def test_json_depth_limit(env: Env, limited: tuple[LiveApp, World], limit: str, kind: str) -> None:
    """At ``max_json_depth`` nested containers a body is read (here by a route that takes
    no body: 200); one more is 422, on any route, before authentication too."""
    app, world = (env.app, env.world) if limit == "default" else limited
    depth = DEFAULT_DEPTH if limit == "default" else LIMITED_DEPTH
    assert depth == (env.max_depth if limit == "default" else LIMITED_DEPTH)
    key = json.dumps({"api_key": world.a.keys["admin"]})
    json_type = {"content-type": "application/json"}

    def refresh(content: bytes) -> tuple[httpx.Response, list[str]]:
        token, _ = app.request("POST", "/v1/auth/token", content=key, headers=json_type)
        auth = {"Authorization": f"Bearer {token.json()['access_token']}", **json_type}
        return app.request("POST", "/v1/auth/refresh", content=content, headers=auth)

    at_limit, logged = refresh(_nested(depth, kind))
    assert at_limit.status_code == 200, (at_limit.text, logged)
    over, logged = refresh(_nested(depth + 1, kind))
    _assert_problem(over, 422)
    unauthenticated, _ = app.request(
        "POST", "/v1/auth/token", content=_nested(depth + 1, kind), headers=json_type
    )
    _assert_problem(unauthenticated, 422)
    very_deep, _ = app.request(
        "POST", "/v1/auth/token", content=_nested(DEEP, kind), headers=json_type
    )
    _assert_problem(very_deep, 422)


NDJSON = "application/x-ndjson"
"""JSON Lines (a session bundle): a 2xx body of this type is JSON line by line."""


def is_json_body(response: httpx.Response) -> bool:
    """Whether a body is JSON (one document, or one per line for ``NDJSON``)."""
    lines = (
        response.text.splitlines()
        if response.headers.get("content-type", "").startswith(NDJSON)
        else [response.text]
    )
    try:
        for line in lines:
            json.loads(line)
    except ValueError:
        return False
    return bool(lines)
