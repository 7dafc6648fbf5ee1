"""``proctor review`` against the real app served over HTTP (uvicorn in a thread), SQLite
and PostgreSQL: a reviewer's key lists, shows, scores and skips; refusals are ``error:``
lines with status 1, bad options status 2; the agreement report as a table and as JSON."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from typer.testing import CliRunner, Result

from clients.sdk import ProctorClient
from judge.prompts import PROMPT_VERSION
from server.cli.main import app
from tests.clients.test_sdk_harness import serving
from tests.support.api import World, test_settings
from tests.support.ports import free_port
from tests.support.review import add_task, add_verdict, human_verdicts, reviewer_key


def review(url: str, key: str, *args: str) -> Result:
    """``proctor review ARGS --server URL`` with ``key`` in ``PROCTOR_API_KEY``."""
    return CliRunner().invoke(
        app,
        ["review", *args, "--server", url],
        env={"PROCTOR_API_KEY": key, "COLUMNS": "200"},
    )


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def answered_session(url: str, world: World) -> str:
    """A 3-item session of organisation A, answered through the SDK (nothing scores it)."""
    assert world.a.model_id is not None
    with ProctorClient(url, world.a.keys["evaluator"]) as client:
        session = client.create_session(model_id=world.a.model_id, n_items=3)
        for item in client.items(session.id):
            client.submit_answer(session.id, item, "B")
    return str(session.id)


def test_review_commands(world_db: tuple[str, World]) -> None:
    db_url, world = world_db
    with serving(test_settings(db_url, scoring_in_process=False)) as url:
        sid = answered_session(url, world)
        first = asyncio.run(add_task(db_url, sid, 0))
        second = asyncio.run(add_task(db_url, sid, 1, reason="audit"))
        asyncio.run(
            add_verdict(db_url, sid, 0, judge="judge-v1", score=1, prompt_version=PROMPT_VERSION)
        )
        key = asyncio.run(reviewer_key(db_url, world.a.id))

        listed = as_json(review(url, key, "list", "--json"))
        assert [t["task_id"] for t in listed["tasks"]] == [first, second]
        audit = as_json(review(url, key, "list", "--reason", "audit", "--json"))
        assert [t["task_id"] for t in audit["tasks"]] == [second]
        paged = as_json(review(url, key, "list", "--limit", "1", "--json"))
        assert paged["next_after"] == first
        table = review(url, key, "list")
        assert table.exit_code == 0 and "needs_review" in table.stdout, table.output

        shown = as_json(review(url, key, "show", str(first), "--json"))
        assert shown["answer"] == "B" and shown["judges"][0]["score"] == 1
        text = review(url, key, "show", str(first))
        assert text.exit_code == 0, text.output
        assert "reference:" in text.stdout and "judge-v1" in text.stdout

        scored = as_json(review(url, key, "score", str(first), "3", "--note", "fine", "--json"))
        assert (scored["state"], scored["human_scores"]) == ("done", 1)
        again = review(url, key, "score", str(first), "0")
        assert again.exit_code == 1 and "error: 409" in again.output, again.output
        [verdict] = asyncio.run(human_verdicts(db_url, sid))
        assert (verdict.score, verdict.detail) == (3, "fine")

        skipped = review(url, key, "skip", str(second))
        assert skipped.exit_code == 0 and "skipped" in skipped.stdout
        assert as_json(review(url, key, "list", "--json"))["tasks"] == []

        assert review(url, key, "score", str(second), "4").exit_code == 2
        assert review(url, key, "show", "0").exit_code == 2
        missing = review(url, key, "show", "999999")
        assert missing.exit_code == 1 and "error: 404" in missing.output
        vendor = review(url, world.a.keys["vendor"], "list")
        assert vendor.exit_code == 1 and "error: 403" in vendor.output
        wrong_key = review(url, "pk_not-a-key", "list")
        assert wrong_key.exit_code == 1 and "error: 401" in wrong_key.output

        auditor = world.a.keys["auditor"]
        report = as_json(review(url, auditor, "agreement", "--json"))
        assert [r["judge"] for r in report["by_judge"]] == ["judge-v1"]
        assert report["by_judge"][0]["n"] == 1 and report["reviewers"]["n"] == 0
        shown_report = review(url, auditor, "agreement")
        assert shown_report.exit_code == 0 and "judge-v1 vs people" in shown_report.stdout
        assert review(url, key, "agreement").exit_code == 1  # reviewers may not read it


def test_an_unreachable_server_is_an_error() -> None:
    result = review(f"http://127.0.0.1:{free_port()}", "pk_x", "list")
    assert result.exit_code == 1
    assert "error: cannot reach" in result.output
