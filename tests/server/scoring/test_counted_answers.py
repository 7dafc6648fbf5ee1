"""One score rule for every reader: scoring progress, the leaderboard's per-session scores
and an adaptive session's own scores all count an answer the same way (reviewers first,
then the board's judges under the current prompt version), on a real database.

Before the rule had one home, adaptive sessions averaged every verdict of an answer,
people, other judges and old prompt versions included: the answers below are chosen so
that the old average and the rule disagree on each of them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from judge.prompts import PROMPT_VERSION
from judge.rubric import MAX_SCORE
from server.leaderboard.service import session_scores
from server.review.raters import HUMAN_PROMPT_VERSION, human_rater
from server.scoring.assignment import JudgeAssignment
from server.scoring.effective import counted_answers
from server.scoring.models import Verdict
from server.scoring.service import progress
from server.sessions import assisted
from server.sessions.adaptive import scores_of
from server.sessions.models import EvalSession
from tests.support.api import seed_world
from tests.support.database import database_session
from tests.support.scored import JUDGE, add_model, scored_session

BOARD = JudgeAssignment.single(JUDGE)
OLD_PROMPT = "an-older-prompt"


async def _seed(db_url: str) -> uuid.UUID:
    """A scored session of four answers, the board's judge scoring 3, 0, 0, 0; then:
    position 0 also rated 0 by another judge, position 1 rated 3 under an old prompt,
    position 2 reviewed 3 by a person, position 3 reviewed 2 and 3 by two people."""
    world = await seed_world(db_url)
    model_id = await add_model(db_url, world.a.id, "counted")
    session_id = await scored_session(
        db_url,
        org_id=world.a.id,
        model_id=model_id,
        scores=[3, 0, 0, 0],
        created_at=datetime.now(UTC) - timedelta(hours=1),
    )
    extra = [
        (0, "another-judge", PROMPT_VERSION, 0),
        (1, JUDGE, OLD_PROMPT, 3),
        (2, human_rater("reviewer-1"), HUMAN_PROMPT_VERSION, 3),
        (3, human_rater("reviewer-1"), HUMAN_PROMPT_VERSION, 2),
        (3, human_rater("reviewer-2"), HUMAN_PROMPT_VERSION, 3),
    ]
    async with database_session(db_url) as db:
        for position, judge, prompt_version, score in extra:
            db.add(
                Verdict(
                    session_id=session_id,
                    position=position,
                    judge=judge,
                    prompt_version=prompt_version,
                    score=score,
                    method="human" if prompt_version == HUMAN_PROMPT_VERSION else "judge",
                )
            )
    return session_id


async def test_every_reader_counts_an_answer_with_the_one_rule(fresh_db_url: str) -> None:
    session_id = await _seed(fresh_db_url)
    # reviewers first (position 3: the mean 2.5 rounds half to even), then the board's
    # judge under the current prompt; other judges and old prompts do not count
    expected = {0: 3, 1: 0, 2: 3, 3: 2}
    async with database_session(fresh_db_url) as db:
        counted = await counted_answers(db, judges=BOARD, prompt_version=PROMPT_VERSION)
        by_position = {a.row.position: a.score for a in counted}
        adaptive = await scores_of(db, session_ids=[session_id], judges=BOARD)
        figures = await progress(
            db, session_id=session_id, judges=BOARD, prompt_version=PROMPT_VERSION
        )
    assert by_position == expected
    assert adaptive[session_id] == {p: s / MAX_SCORE for p, s in expected.items()}
    assert (figures.scored, figures.needs_review, figures.points) == (4, 0, sum(expected.values()))
    # the old adaptive reading (the mean of every verdict) disagreed on every answer
    old_mean = {0: 1.5, 1: 1.5, 2: 1.5, 3: 5 / 3}
    assert all(old_mean[p] != expected[p] for p in expected)


async def test_the_leaderboards_session_score_is_the_adaptive_sessions_own_reading(
    fresh_db_url: str,
) -> None:
    session_id = await _seed(fresh_db_url)
    async with database_session(fresh_db_url) as db:
        own = await scores_of(db, session_ids=[session_id], judges=BOARD)
        record = await db.get(EvalSession, session_id)
        assert record is not None
        model_id = record.model_id
        board = await session_scores(
            db, model_id=model_id, judges=BOARD, prompt_version=PROMPT_VERSION
        )
    (score,) = board
    mean = sum(own[session_id].values()) / len(own[session_id]) * 100
    assert score.n_scored == len(own[session_id])
    assert abs(score.score - mean) < 1e-9


async def test_the_neighbours_sql_fast_path_counts_as_the_builder(fresh_db_url: str) -> None:
    """The model-assisted neighbours of a one-judge board are summed by the database
    (``OneJudgeScore``); the sums equal those of ``counted_answers`` on the same
    answers, reviewers first and other judges and prompts left out."""
    session_id = await _seed(fresh_db_url)
    async with database_session(fresh_db_url) as db:
        stranger = EvalSession(model_id=uuid.uuid4())
        in_sql = await assisted._session_means_in_sql(db, record=stranger, judge=JUDGE)
        in_python = await assisted._session_means(db, record=stranger, judges=BOARD)
        record = await db.get(EvalSession, session_id)
        assert record is not None
        near = await assisted.neighbours(db, record=stranger, judges=BOARD)
    assert in_sql == in_python == {record.model_id: [(8.0, 4)]}
    (neighbour,) = near
    assert abs(neighbour.score - 8 / 4 / MAX_SCORE) < 1e-12
