"""Which judges score an answer, and the score it counts with (pure parts)."""

from __future__ import annotations

import math
import uuid

from judge.embedding import CALIBRATED_MATCH_AT, EmbeddingBackend
from judge.panel import PanelRule
from judge.similarity import LexicalBackend
from server.review.raters import human_rater
from server.scoring.assignment import JudgeAssignment, assignment_from
from server.scoring.effective import AnswerRatings, group_ratings
from server.scoring.worker import cascade_from
from tests.support.api import test_settings

JUDGES = [
    {"name": name, "base_url": "http://127.0.0.1:1/v1", "model": "judge"}
    for name in ("j1", "j2", "j3")
]


def test_the_gate_keeps_only_eligible_panel_members_and_an_empty_panel_falls_back() -> None:
    settings = test_settings(
        "sqlite+aiosqlite://",
        judges=JUDGES,
        judge_panel=["j1", "j2", "j3"],
        judge_panel_by_discipline={"law": ["j3"], "math": ["j2", "j3"]},
    )
    assignment = assignment_from(settings, default="j1", eligible=["j1", "j2"])
    assert assignment.judges_for(None) == ("j1", "j2")
    assert assignment.judges_for("math") == ("j2",)
    assert assignment.judges_for("law") == ("j1", "j2")  # j3 is gated out: the global panel
    assert assignment.every_judge == ("j1", "j2")
    alone = assignment_from(
        test_settings("sqlite+aiosqlite://", judges=JUDGES), default="j2", eligible=["j2"]
    )
    assert alone.judges_for("math") == ("j2",)


def test_an_answer_counts_with_the_reviewers_score_then_its_panels_rule() -> None:
    panel = JudgeAssignment(default="j1", panel=("j1", "j2", "j3"), rule=PanelRule.MEDIAN)
    sid = uuid.uuid4()
    rows = [
        (sid, 0, "math", "j1", 3),
        (sid, 0, "math", "j2", 0),
        (sid, 0, "math", "j3", 3),
        (sid, 1, "math", "j1", None),
        (sid, 1, "math", "j2", None),
        (sid, 2, "math", "j1", 0),
        (sid, 2, "math", human_rater("key-1"), 2),
        (sid, 2, "math", human_rater("key-2"), 3),
        (sid, 3, "math", "other-judge", 3),
    ]
    grouped = group_ratings(rows)
    assert {key[1]: r.score(panel) for key, r in grouped.items()} == {0: 3, 1: None, 2: 2, 3: None}
    columns = grouped[(sid, 0)].judge_columns(panel)
    assert columns == [3.0, 0.0, 3.0]
    assert grouped[(sid, 2)].judge_columns(panel) == [2.0, 2.0, 2.0]
    assert all(math.isnan(c) for c in grouped[(sid, 1)].judge_columns(panel))


def test_a_single_judge_view_ignores_the_other_judges() -> None:
    ratings = AnswerRatings("math", judges={"j1": 0, "j2": 3})
    assert ratings.score(JudgeAssignment.single("j2")) == 3
    assert ratings.score(JudgeAssignment.single("j1")) == 0


def test_the_similarity_backend_setting_chooses_the_cascades_filter() -> None:
    lexical = cascade_from(test_settings("sqlite+aiosqlite://"))
    embedding = cascade_from(test_settings("sqlite+aiosqlite://", similarity_backend="embedding"))
    assert isinstance(lexical.similarity.backend, LexicalBackend)
    assert isinstance(embedding.similarity.backend, EmbeddingBackend)
    assert embedding.similarity.match_at == CALIBRATED_MATCH_AT
    decision = embedding.route(
        qtype="fill_in",
        answer="mitochondria",
        reference="the mitochondria",
        options=None,
        language="en",
    )
    assert decision is not None and decision.method == "similarity"
