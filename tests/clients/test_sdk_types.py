"""The SDK's response types parse the wire format into the typed vocabulary."""

from __future__ import annotations

import json

import pytest

from clients.sdk import (
    AdaptiveBound,
    AdaptiveOptions,
    AdaptivePolicy,
    AdaptiveSummary,
    ScoringProgress,
    Session,
    SessionMode,
    SessionState,
    StopReason,
)

SESSION = {
    "id": "s1",
    "org_id": "o1",
    "model_id": "m1",
    "mode": "adaptive",
    "state": "answered",
    "n_items": 10,
    "allocated": 0,
    "pending": 0,
    "completed": 10,
    "released": 0,
    "pending_window": 1,
    "deadline_at": "2026-11-30T00:00:00+00:00",
    "created_at": "2026-11-23T00:00:00+00:00",
    "ended_at": None,
    "added_by_a_newer_server": True,
    "adaptive": {
        "policy": "neyman-irt",
        "bound": "normal",
        "delta": 0.05,
        "target_halfwidth": 5.0,
        "budget": 20,
        "n_scored": None,
        "estimate": None,
        "halfwidth": None,
        "checks": None,
        "stop_reason": "budget",
        "history_models": 3,
    },
}


def test_a_session_reads_into_enums_and_a_typed_adaptive_summary() -> None:
    session = Session.from_json(SESSION)
    assert session.mode is SessionMode.ADAPTIVE and session.state is SessionState.ANSWERED
    assert session.done and session.state == "answered"
    summary = session.adaptive
    assert isinstance(summary, AdaptiveSummary)
    assert summary.policy is AdaptivePolicy.NEYMAN_IRT and summary.bound is AdaptiveBound.NORMAL
    assert summary.stop_reason is StopReason.BUDGET and summary.estimate is None
    assert summary["history_models"] == 3


def test_scoring_is_complete_only_in_a_final_state_with_nothing_waiting() -> None:
    base = {"session_id": "s1", "judge": "j", "prompt_version": "v1", "answers": 2, "judged": 2}
    answered = ScoringProgress.from_json({**base, "state": "answered", "waiting": 0})
    scored = ScoringProgress.from_json({**base, "state": "scored", "waiting": 0})
    assert answered.state is SessionState.ANSWERED and not answered.complete
    assert scored.complete


def test_a_state_a_newer_server_added_arrives_as_its_string_and_counts_as_nothing_known() -> None:
    session = Session.from_json({**SESSION, "state": "paused", "mode": "streaming"})
    assert (session.state, session.mode) == ("paused", "streaming")
    assert not isinstance(session.state, SessionState) and not session.done
    progress = ScoringProgress.from_json(
        {
            "session_id": "s1",
            "judge": "j",
            "prompt_version": "v1",
            "answers": 2,
            "judged": 2,
            "state": "paused",
            "waiting": 0,
        }
    )
    assert progress.state == "paused" and not progress.complete
    with pytest.raises(TypeError, match="SessionState: expected a string"):
        Session.from_json({**SESSION, "state": 3})


def test_adaptive_options_send_only_what_is_chosen() -> None:
    options = AdaptiveOptions(policy=AdaptivePolicy.NEYMAN, target_halfwidth=3.0)
    assert json.loads(json.dumps(options.to_json())) == {
        "policy": "neyman",
        "target_halfwidth": 3.0,
    }
    assert AdaptiveOptions().to_json() == {}
