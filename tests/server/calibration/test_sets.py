"""Calibration sets: the CSV reader's problems (``file:line: field: what``), hostile bytes,
all-or-nothing imports, versions, and sets frozen from the review queue's human verdicts."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from server.calibration.models import CalibrationAnswer, CalibrationSet, CalibrationSource
from server.calibration.service import (
    CalibrationInputError,
    CalibrationRow,
    content_sha256,
    create_set,
    find_set,
    parse_calibration_csv,
    read_calibration_csv,
    rounded_mean,
    set_answers,
)
from server.review.raters import HUMAN_METHOD, HUMAN_PROMPT_VERSION, human_rater
from server.scoring.models import Verdict
from tests.server.calibration.support import calibration_rows, seed_reviewed_answer, write_csv
from tests.support.api import login, running_api, seed_world, test_settings
from tests.support.cli import proctor_env
from tests.support.database import database_session
from tests.support.sessions import answer_for, answer_items

HEADER = "question,reference,answer,human_score,language,discipline,model_family,cluster\n"


def problems(text: str, name: str = "set.csv") -> list[str]:
    with pytest.raises(CalibrationInputError) as caught:
        parse_calibration_csv(name, text)
    return [str(p) for p in caught.value.errors]


def test_a_good_file_reads_every_field() -> None:
    rows = parse_calibration_csv(
        "set.csv",
        HEADER + 'Q1?,cobalt 1,"It is cobalt 1,\nsurely.",3,zh,chemistry,OpenAI,fam-1\n'
        "\n"
        "Q2?,cobalt 2,It is lead.,0,,,,\n",
    )
    assert rows == [
        CalibrationRow(
            "Q1?", "cobalt 1", "It is cobalt 1,\nsurely.", 3, "zh", "chemistry", "OpenAI", "fam-1"
        ),
        CalibrationRow("Q2?", "cobalt 2", "It is lead.", 0, "en", None, None, None),
    ]
    minimal = parse_calibration_csv(
        "m.csv", "\ufeffquestion,reference,answer,human_score\nQ,R,A,2\n"
    )
    assert minimal == [CalibrationRow("Q", "R", "A", 2)]


def test_every_problem_is_named_by_file_line_and_field() -> None:
    text = (
        HEADER
        + "Q1?,R,A,3,en,,,\n"
        + "Q2?,R,A,4,en,,,\n"  # line 3: score out of range
        + ",R,A,1,en,,,\n"  # line 4: empty question
        + "Q4?,R,,x,en,,,\n"  # line 5: empty answer, bad score
        + "Q5?,R,A,2,english language,,,\n"  # line 6: bad language tag
        + "Q6?,R,A,2\n"  # line 7: too few fields
    )
    assert problems(text) == [
        "set.csv:3: human_score: '4' is not an integer 0-3",
        "set.csv:4: question: is empty",
        "set.csv:5: answer: is empty",
        "set.csv:5: human_score: 'x' is not an integer 0-3",
        "set.csv:6: language: 'english language' is not a language tag such as en or zh",
        "set.csv:7: row: has 4 fields, the header has 8",
    ]


def test_header_problems() -> None:
    assert problems("") == [
        "set.csv: file: is empty; expected a header question,reference,answer,human_score"
    ]
    assert problems("question,reference,answer\n") == [
        "set.csv:1: human_score: required column is missing"
    ]
    assert problems("question,reference,answer,human_score,scroe,answer\n") == [
        "set.csv:1: answer: column appears twice in the header",
        "set.csv:1: scroe: unknown column (known: question,reference,answer,human_score,"
        "language,discipline,model_family,cluster)",
    ]
    assert problems("question,reference,answer,human_score\n") == [
        "set.csv: file: has a header but no answers"
    ]


def test_hostile_bytes_are_refused(tmp_path: Path) -> None:
    assert problems(HEADER + "Q\x00?,R,A,3,en,,,\n") == [
        "set.csv:2: question: contains the control character U+0000 at 1"
    ]
    assert problems(HEADER + "Q?,R,A\x1b[2J,3,en,,,\n") == [
        "set.csv:2: answer: contains the control character U+001B at 1"
    ]
    assert problems(HEADER + "Q?,R,A,3,en,law\u2028x,,\n") == [
        "set.csv:2: discipline: contains the control character U+2028"
    ]
    assert problems(HEADER + "Q?,R,A,3,en,,,fam\ty\n") == [
        "set.csv:2: cluster: contains the control character U+0009"
    ]
    assert problems(HEADER + f"Q?,R,{'a' * 100_001},3,en,,,\n") == [
        "set.csv:2: answer: is longer than 100000 characters"
    ]
    assert problems(HEADER + 'Q?,R,"unterminated,3,en,,,\n')[0].startswith("set.csv:2: csv:")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(HEADER.encode() + b"Q?,R,\xff\xfe,3,en,,,\n")
    with pytest.raises(CalibrationInputError) as caught:
        read_calibration_csv(binary)
    assert str(caught.value) == f"{binary}:2: file: not valid UTF-8"


def test_rounded_mean_rounds_half_up() -> None:
    assert [rounded_mean(s) for s in ([3], [2, 3], [1, 2], [0, 1, 1], [0, 3], [3, 3, 2])] == [
        3,
        3,
        2,
        1,
        2,
        3,
    ]


def test_content_hash_depends_on_every_field_and_the_order() -> None:
    a, b = CalibrationRow("Q", "R", "A", 3), CalibrationRow("Q", "R", "A", 2)
    assert content_sha256([a, b]) != content_sha256([b, a])
    assert content_sha256([a]) != content_sha256([CalibrationRow("Q", "R", "A", 3, cluster="f")])
    assert content_sha256([a, b]) == content_sha256([CalibrationRow("Q", "R", "A", 3), b])


async def test_a_new_import_under_a_name_is_the_next_version_and_sets_are_frozen(
    db_session: Any,
) -> None:
    first = [CalibrationRow(f"Q{i}", "R", "A", i % 4) for i in range(5)]
    second = [CalibrationRow(f"Q{i}", "R", "B", 3) for i in range(3)]
    name = f"set-{uuid.uuid4().hex[:8]}"
    v1 = await create_set(
        db_session, name=name, rows=first, source=CalibrationSource.CSV, created_by="t"
    )
    v2 = await create_set(
        db_session, name=name, rows=second, source=CalibrationSource.CSV, created_by="t"
    )
    other = await create_set(
        db_session, name=name + "-x", rows=first, source=CalibrationSource.CSV, created_by="t"
    )
    assert (v1.version, v2.version, other.version) == (1, 2, 1)
    assert (v1.n, v2.n) == (5, 3) and v1.sha256 == other.sha256 != v2.sha256
    assert (await find_set(db_session, name)) is v2
    assert (await find_set(db_session, name, 1)) is v1
    assert [a.answer for a in await set_answers(db_session, v1.id)] == ["A"] * 5
    assert [a.human_score for a in await set_answers(db_session, v1.id)] == [0, 1, 2, 3, 0]


@pytest.mark.parametrize("backend", ["postgres"])
async def test_the_import_command_is_all_or_nothing(fresh_db_url: str, tmp_path: Path) -> None:
    env = {"PROCTOR_DATABASE_URL": fresh_db_url}
    rows = calibration_rows(n=60)
    good = write_csv(tmp_path / "good.csv", rows)
    bad = write_csv(tmp_path / "bad.csv", rows)
    with bad.open("a", encoding="utf-8") as out:
        out.write("Q?,R,A,7,en,,,\nQ\x00,R,A,1,en,,,\n")
    refused = proctor_env(env, "judge", "calibration-set", "import", str(bad), "--name", "demo")
    assert refused.returncode == 1
    assert f"{bad}:62: human_score: '7' is not an integer 0-3" in refused.stderr
    assert f"{bad}:63: question: contains the control character U+0000" in refused.stderr
    bad_name = proctor_env(env, "judge", "calibration-set", "import", str(good), "--name", "a b")
    assert bad_name.returncode == 2 and "--name" in bad_name.stderr
    async with database_session(fresh_db_url) as db:
        assert (await db.execute(select(func.count()).select_from(CalibrationAnswer))).scalar() == 0
        assert (await db.execute(select(func.count()).select_from(CalibrationSet))).scalar() == 0
    for expected in (1, 2):
        done = proctor_env(env, "judge", "calibration-set", "import", str(good), "--name", "demo")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["version"] == expected
        assert json.loads(done.stdout)["n"] == 60


@pytest.mark.parametrize("backend", ["postgres"])
async def test_a_set_from_the_review_queue_takes_the_reviewers_rounded_mean(
    fresh_db_url: str,
) -> None:
    world = await seed_world(fresh_db_url)
    settings = test_settings(fresh_db_url, judge_drift_interval_s=0)
    async with running_api(settings) as (_, client):
        assert world.a.model_id is not None
        evaluator = await login(client, world.a.keys["evaluator"])
        opened = await client.post(
            "/v1/sessions",
            json={"model_id": str(world.a.model_id), "n_items": 4},
            headers=evaluator,
        )
        session_id = opened.json()["id"]
        vendor = await login(client, world.a.keys["vendor"])
        answered = await answer_items(
            client,
            fresh_db_url,
            session_id,
            vendor,
            lambda item, pos: answer_for(item, pos % 2 == 0),
        )
        admin = await login(client, world.a.keys["admin"])
        empty = await client.post("/v1/admin/calibration-sets", json={"name": "rev"}, headers=admin)
        assert empty.status_code == 422, empty.text
        reviews = {0: [3], 1: [2, 3], 2: [0, 1, 1]}  # position -> reviewers' scores
        async with database_session(fresh_db_url) as db:
            for position, scores in reviews.items():
                for k, score in enumerate(scores):
                    db.add(
                        Verdict(
                            session_id=uuid.UUID(session_id),
                            position=answered[position].position,
                            judge=human_rater(f"reviewer-{k}"),
                            prompt_version=HUMAN_PROMPT_VERSION,
                            score=score,
                            method=HUMAN_METHOD,
                        )
                    )
        auditor = await login(client, world.a.keys["auditor"])
        refused = await client.post(
            "/v1/admin/calibration-sets", json={"name": "rev"}, headers=auditor
        )
        assert refused.status_code == 403
        created = await client.post(
            "/v1/admin/calibration-sets", json={"name": "rev"}, headers=admin
        )
        assert created.status_code == 201, created.text
        body = created.json()
        assert (body["name"], body["version"], body["source"], body["n"]) == ("rev", 1, "review", 3)
        listed = await client.get("/v1/admin/calibration-sets", headers=auditor)
        assert [s["id"] for s in listed.json()] == [body["id"]]
        runs = await client.get(f"/v1/admin/calibration-sets/{body['id']}/runs", headers=auditor)
        assert runs.status_code == 200 and runs.json() == []
        missing = await client.get(f"/v1/admin/calibration-sets/{uuid.uuid4()}/runs", headers=admin)
        assert missing.status_code == 404
    async with database_session(fresh_db_url) as db:
        frozen = await set_answers(db, uuid.UUID(body["id"]))
    by_question = {a.question: a for a in frozen}
    for position, scores in reviews.items():
        shown = answered[position]
        answer = by_question[shown.item.question]
        assert answer.human_score == rounded_mean(scores)
        assert (answer.answer, answer.reference) == (shown.answer, shown.item.answer)
        assert answer.cluster == str(shown.item.family_id)
        assert answer.discipline == shown.item.discipline
    assert sorted(a.human_score for a in frozen) == [1, 3, 3]


@pytest.mark.parametrize("backend", ["postgres"])
async def test_the_from_review_command_freezes_the_review_queue(fresh_db_url: str) -> None:
    env = {"PROCTOR_DATABASE_URL": fresh_db_url}
    empty = proctor_env(env, "judge", "calibration-set", "from-review", "--name", "rev")
    assert empty.returncode == 1 and "no answers scored by people" in empty.stderr
    world = await seed_world(fresh_db_url, per_cell=1)
    await seed_reviewed_answer(fresh_db_url, world)
    done = proctor_env(env, "judge", "calibration-set", "from-review", "--name", "rev")
    assert done.returncode == 0, done.stderr
    frozen = json.loads(done.stdout)
    assert (frozen["name"], frozen["version"], frozen["source"], frozen["n"]) == (
        "rev",
        1,
        "review",
        1,
    )
    async with database_session(fresh_db_url) as db:
        (answer,) = await set_answers(db, uuid.UUID(frozen["id"]))
    assert answer.human_score == 3
