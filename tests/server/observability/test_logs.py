"""Log lines: JSON when not on a terminal, one access line per request with its request id,
and no secret, answer or reference answer anywhere.

The whole-process test runs ``proctor serve`` (``PROCTOR_LOG_FORMAT=auto``, its output a
file, so JSON), drives a scripted session through it, stops it, and reads every line the
process wrote.
"""

from __future__ import annotations

import io
import json
import logging
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

from bank.models import Item
from server.observability.log_format import LogFormat, LogLevel
from server.observability.logs import REDACTED, configure_logging, wants_json
from tests.support.api import JWT_SECRET, live_server, login, open_session, seed_world
from tests.support.bank_keys import TEST_BANK_KEYS
from tests.support.database import make_database_url
from tests.support.sessions import answer_items

from .scrape import METRICS_TOKEN, bearer

MIN_SCANNED = 6
"""Shorter references (a multiple-choice letter) would match anywhere; they are skipped."""


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of ``path`` as a JSON object (fails on any other line)."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    parsed = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            pytest.fail(f"not a JSON line: {line!r}")
        assert isinstance(record, dict), line
        parsed.append(record)
    return parsed


async def test_serve_writes_json_lines_without_secrets(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    db_url = await make_database_url("sqlite", request, tmp_path)
    world = await seed_world(db_url)
    assert world.a.model_id is not None
    env = {
        "PROCTOR_DATABASE_URL": db_url,
        "PROCTOR_DATA_DIR": str(tmp_path / "data"),
        "PROCTOR_JWT_SECRET": JWT_SECRET,
        "PROCTOR_BANK_KEYS": TEST_BANK_KEYS,
        "PROCTOR_METRICS_TOKEN": METRICS_TOKEN,
        "PROCTOR_LOG_FORMAT": LogFormat.AUTO.value,
        "PROCTOR_LOG_LEVEL": LogLevel.DEBUG.value,  # every line there is, probes included
    }
    traced = f"trace-{uuid.uuid4().hex[:12]}"
    answers: list[str] = []
    items: list[Item] = []

    def answer(item: Item, position: int) -> str:
        items.append(item)
        text = item.answer if position % 2 else f"model answer {uuid.uuid4().hex}"
        answers.append(text)
        return text

    with live_server(env, tmp_path) as server:
        async with httpx.AsyncClient(base_url=server.url) as client:
            evaluator_key, vendor_key = world.a.keys["evaluator"], world.a.keys["vendor"]
            evaluator = await login(client, evaluator_key)
            session = await open_session(client, evaluator, world.a.model_id, n_items=4)
            vendor = await login(client, vendor_key, session["id"])
            await answer_items(client, db_url, session["id"], vendor, answer)
            tagged = await client.get(
                f"/v1/sessions/{session['id']}", headers={**vendor, "X-Request-ID": traced}
            )
            assert tagged.headers["X-Request-ID"] == traced
            assert (await client.get("/metrics", headers=bearer(METRICS_TOKEN))).status_code == 200
            assert (await client.get("/readyz")).status_code == 200
            assert (await client.get("/openapi.json")).status_code == 200
            assert (await client.get("/no/such/path")).status_code == 404

    records = read_json_lines(server.log)
    access = [r for r in records if r.get("logger") == "proctor.access"]
    mine = [r for r in access if r.get("request_id") == traced]
    assert len(mine) == 1, mine  # one line per request
    line = mine[0]
    assert line["route"] == "/v1/sessions/{session_id}" and line["method"] == "GET"
    assert line["status"] == 200 and line["duration_ms"] > 0
    assert line["subject"] and line["org"] == str(world.a.id)
    assert line["client"] == "127.0.0.1"
    assert {"level", "timestamp", "event"} <= set(line)
    routes = {(r["route"], r["status"]) for r in access}
    assert ("/v1/sessions/{session_id}/answers", 201) in routes
    assert ("/metrics", 200) in routes and ("/readyz", 200) in routes
    assert ("unmatched", 404) in routes
    assert ("/openapi.json", 200) in routes  # a Starlette route, named by its endpoint
    assert not any("INSERT INTO" in r["event"] for r in records)  # no SQL, even at DEBUG
    assert all(len(r["request_id"]) >= 1 for r in access)
    assert any(r.get("logger") != "proctor.access" for r in records)  # stdlib lines too

    secrets = [evaluator_key, vendor_key, JWT_SECRET, METRICS_TOKEN, TEST_BANK_KEYS]
    secrets += [value.split(" ", 1)[1] for value in (*evaluator.values(), *vendor.values())]
    secrets += answers
    secrets += [item.answer for item in items] + [item.explanation or "" for item in items]
    scanned = [s for s in secrets if len(s) >= MIN_SCANNED]
    assert len(scanned) >= 10
    text = server.log.read_text(encoding="utf-8")
    for secret in scanned:
        assert secret not in text, f"a secret, answer or reference reached the log: {secret!r}"


def test_stdlib_lines_get_the_request_id_and_secrets_are_blanked() -> None:
    stream = io.StringIO()
    configure_logging(LogFormat.JSON, LogLevel.INFO, stream)
    try:
        with structlog.contextvars.bound_contextvars(request_id="req-1"):
            logging.getLogger("server.somewhere").warning("plain %s line", "stdlib")
            logging.getLogger("server.somewhere").info("with extras", extra={"token": "t0ps3cr3t"})
            structlog.get_logger("proctor.test").info(
                "fields",
                authorization="Bearer abc.def.ghi",
                API_KEY="pk_live_123456",
                answer="the model's answer",
                reference="the reference answer",
                route="/v1/x",
            )
        logging.getLogger("server.somewhere").debug("below the level")
    finally:
        configure_logging(LogFormat.JSON, LogLevel.INFO)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["plain stdlib line", "with extras", "fields"]
    assert all(line["request_id"] == "req-1" for line in lines)
    assert lines[0]["level"] == "warning" and lines[0]["logger"] == "server.somewhere"
    assert lines[1]["token"] == REDACTED
    fields = lines[2]
    for key in ("authorization", "API_KEY", "answer", "reference"):
        assert fields[key] == REDACTED
    assert fields["route"] == "/v1/x"
    for secret in ("abc.def.ghi", "pk_live_123456", "the model's answer", "t0ps3cr3t"):
        assert secret not in stream.getvalue()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_format_is_console_on_a_terminal_and_json_otherwise() -> None:
    assert not wants_json(LogFormat.AUTO, _Terminal())
    assert wants_json(LogFormat.AUTO, io.StringIO())
    assert wants_json(LogFormat.JSON, _Terminal())
    assert not wants_json(LogFormat.CONSOLE, io.StringIO())
    terminal = _Terminal()
    configure_logging(LogFormat.AUTO, LogLevel.INFO, terminal)
    try:
        logging.getLogger("server.somewhere").warning("for people")
    finally:
        configure_logging(LogFormat.JSON, LogLevel.INFO)
    written = terminal.getvalue()
    assert "for people" in written
    with pytest.raises(ValueError):
        json.loads(written)
