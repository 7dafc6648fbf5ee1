"""The SDK's response types and the server's response models describe the same bodies.

The wire vocabulary (states, modes, roles, adaptive policies and bounds) is written once,
in ``clients.sdk.types``, and the server imports it; the response shapes exist twice (the
server's pydantic models document them in OpenAPI, the SDK's dataclasses parse them, and
the SDK may import nothing of the server). These tests keep the two sides equal, and the
adaptive vocabulary equal to the statistics it names in ``bank.adaptive``.
"""

from __future__ import annotations

import dataclasses
import typing
import uuid
from enum import StrEnum
from typing import Any

import pytest
from pydantic import BaseModel

from bank.adaptive.bounds import Bound
from bank.adaptive.policy import Policy
from bank.adaptive.policy import StopReason as BankStopReason
from clients.sdk import types as sdk
from server.auth.permissions import ROLE_PERMISSIONS
from server.auth.schemas import WhoAmI
from server.config import Settings
from server.leaderboard.fields import (
    ROW_FIELDS,
    ContaminationOut,
    CostOut,
    DisciplineScoreOut,
    GapOut,
    LatencyOut,
    ReplayOut,
    RowOut,
    SummaryOut,
)
from server.leaderboard.schemas import (
    AnchorInfoOut,
    BaselineRowOut,
    BaselinesOut,
    DiagnosticsOut,
    DisciplineBoardOut,
    DisciplineModelOut,
    DisciplinesOut,
    JudgeCalibrationOut,
    LeaderboardOut,
)
from server.registry.schemas import ModelOut
from server.scoring.schemas import ScoringOut
from server.sessions import states
from server.sessions.schemas import (
    AdaptiveOptions,
    AdaptiveOut,
    AnswerAccepted,
    CommitmentOut,
    DisciplineEstimateOut,
    ItemOut,
    SampleSourceOut,
    SessionOut,
)

PAIRS: list[tuple[type, type[BaseModel], set[str]]] = [
    (sdk.Model, ModelOut, set()),
    (sdk.Session, SessionOut, set()),
    (sdk.CommitmentReveal, CommitmentOut, set()),
    (sdk.SampleSource, SampleSourceOut, {"recorded"}),
    (sdk.AdaptiveSummary, AdaptiveOut, set()),
    (sdk.DisciplineEstimate, DisciplineEstimateOut, set()),
    (sdk.Item, ItemOut, set()),
    (sdk.Accepted, AnswerAccepted, {"already_answered"}),
    (sdk.ScoringProgress, ScoringOut, set()),
    (sdk.Identity, WhoAmI, set()),
    (sdk.Leaderboard, LeaderboardOut, set()),
    (sdk.LeaderboardRow, RowOut, set()),
    (sdk.ScoreSummary, SummaryOut, set()),
    (sdk.DisciplineScore, DisciplineScoreOut, set()),
    (sdk.Latency, LatencyOut, set()),
    (sdk.Cost, CostOut, set()),
    (sdk.Contamination, ContaminationOut, set()),
    (sdk.ReplayRate, ReplayOut, set()),
    (sdk.GeneralisationGap, GapOut, set()),
    (sdk.Anchor, AnchorInfoOut, set()),
    (sdk.Baselines, BaselinesOut, set()),
    (sdk.BaselineRating, BaselineRowOut, set()),
    (sdk.Diagnostics, DiagnosticsOut, set()),
    (sdk.DisciplineLeaderboard, DisciplinesOut, set()),
    (sdk.DisciplineBoard, DisciplineBoardOut, set()),
    (sdk.DisciplineEntry, DisciplineModelOut, set()),
    (sdk.JudgeCalibration, JudgeCalibrationOut, set()),
]
FILLED_IN_BY_FROM_JSON: dict[type, set[str]] = {sdk.Item: {"options"}}
"""Fields without a dataclass default that ``from_json`` reads as None when absent."""


each_pair = pytest.mark.parametrize(
    ("sdk_type", "model", "client_only"),
    PAIRS,
    ids=lambda p: p.__name__ if isinstance(p, type) else "",
)


@each_pair
def test_every_field_the_server_sends_is_read_by_the_sdk(
    sdk_type: type, model: type[BaseModel], client_only: set[str]
) -> None:
    sdk_fields = {f.name for f in dataclasses.fields(sdk_type)}
    assert sdk_fields - client_only == set(model.model_fields)


def nested_models(annotation: object) -> set[type[BaseModel]]:
    """The response models an annotation names (``list[RowOut] | None`` -> ``{RowOut}``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {annotation}
    return {m for arg in typing.get_args(annotation) for m in nested_models(arg)}


def test_every_part_of_a_paired_body_has_its_sdk_type() -> None:
    paired = {model for _, model, _ in PAIRS}
    parts = {
        part
        for model in paired
        for field in model.model_fields.values()
        for part in nested_models(field.annotation)
    }
    assert parts <= paired, f"no SDK type for {sorted(m.__name__ for m in parts - paired)}"


@each_pair
def test_a_field_the_server_may_leave_out_is_optional_in_the_sdk(
    sdk_type: type, model: type[BaseModel], client_only: set[str]
) -> None:
    """Fields the reader may not see are absent (``exclude_unset``): the SDK must not
    require them."""
    sdk_fields = {f.name: f for f in dataclasses.fields(sdk_type)}
    may_be_absent = {name for name, f in model.model_fields.items() if not f.is_required()}
    required_in_sdk = {
        name
        for name in may_be_absent
        if sdk_fields[name].default is dataclasses.MISSING
        and sdk_fields[name].default_factory is dataclasses.MISSING
    }
    assert required_in_sdk <= FILLED_IN_BY_FROM_JSON.get(sdk_type, set())


@pytest.mark.parametrize(
    ("sdk_type", "model", "field"),
    [
        (sdk.Session, SessionOut, "state"),
        (sdk.Session, SessionOut, "mode"),
        (sdk.ScoringProgress, ScoringOut, "state"),
        (sdk.AdaptiveSummary, AdaptiveOut, "policy"),
        (sdk.AdaptiveSummary, AdaptiveOut, "bound"),
        (sdk.AdaptiveSummary, AdaptiveOut, "stop_reason"),
    ],
)
def test_vocabulary_fields_use_the_one_enum(
    sdk_type: type, model: type[BaseModel], field: str
) -> None:
    (sdk_field,) = [f for f in dataclasses.fields(sdk_type) if f.name == field]
    annotation = str(model.model_fields[field].annotation)
    enum_name = str(sdk_field.type).split(" |")[0]
    assert enum_name in annotation


def test_the_server_uses_the_sdk_enums_themselves() -> None:
    assert states.SessionState is sdk.SessionState
    assert states.ItemState is sdk.ItemState
    assert states.OPEN_STATES is sdk.OPEN_STATES
    assert set(ROLE_PERMISSIONS) == set(sdk.Role)
    assert WhoAmI.model_fields["role"].annotation is sdk.Role
    assert AdaptiveOptions.model_fields["policy"].annotation == sdk.AdaptivePolicy | None
    assert Settings.model_fields["adaptive_bound"].annotation is sdk.AdaptiveBound


def values(enum: type[StrEnum]) -> set[str]:
    return {member.value for member in enum}


def test_the_adaptive_vocabulary_names_the_statistics_of_the_bank() -> None:
    # the bank's replay engine knows one more policy (``full``: every item), never offered
    assert values(sdk.AdaptivePolicy) == values(Policy) - {Policy.FULL.value}
    assert values(sdk.AdaptiveBound) == values(Bound)
    assert values(sdk.StopReason) == values(BankStopReason)


def test_the_named_state_sets_partition_the_states() -> None:
    every = set(sdk.SessionState)
    assert every == sdk.OPEN_STATES | sdk.CLOSED_STATES
    assert not sdk.OPEN_STATES & sdk.CLOSED_STATES
    assert sdk.ALL_ANSWERED_STATES | sdk.ENDED_EARLY_STATES == sdk.CLOSED_STATES
    terminal = {state for state in every if not states.SESSION_TRANSITIONS[state]}
    # a scored session moves on only when people finish its reviews: nothing automatic
    assert states.SESSION_TRANSITIONS[sdk.SessionState.SCORED] == {sdk.SessionState.REVIEWED}
    assert terminal | {sdk.SessionState.SCORED} == sdk.FINAL_STATES


def test_enum_members_are_their_wire_strings() -> None:
    summary = sdk.AdaptiveSummary.from_json(
        {
            "policy": "neyman-irt",
            "bound": "normal",
            "delta": 0.05,
            "target_halfwidth": 5.0,
            "budget": 10,
            "history_models": 0,
            "stop_reason": "precise",
            "disciplines": {"math": {"estimate": 50.0, "halfwidth": 5.0, "n_items": 10}},
            "new_field": 1,
        }
    )
    assert summary.disciplines == {"math": sdk.DisciplineEstimate(50.0, 5.0, 10)}
    assert summary.policy is sdk.AdaptivePolicy.NEYMAN_IRT and summary.policy == "neyman-irt"
    assert summary["stop_reason"] == "precise"  # the dict-style read of older SDK versions
    with pytest.raises(KeyError):
        summary["new_field"]


SCORE = {
    "mean": 61.5,
    "ci_low": 55.0,
    "ci_high": 68.0,
    "variance": 4.0,
    "standard_error": 2.0,
    "session_values": [60.0, 63.0],
}
FULL_ROW: dict[str, Any] = {
    "model_id": "m1",
    "position": 1,
    "group": 1,
    "rank_range": [1, 2],
    "beats_next": 0.9,
    "name": "model-one",
    "family": "one",
    "organisation": "Org A",
    "absolute": SCORE,
    "relative": None,
    "sessions": 2,
    "adaptive_sessions": 1,
    "disciplines": {"math": {"score": 6.1, "standard_error": 0.4, "items": 12}},
    "latency": {"median_s": 1.2, "p95_s": 3.4, "reported_median_s": 0.9, "reported_n": 40},
    "cost": {
        "prompt_tokens_per_item": 100.0,
        "completion_tokens_per_item": 20.0,
        "usd_per_1k_items": 0.5,
    },
    "contamination": {
        "replay": {"items": 10, "near_exact": 1, "rate": 0.1, "ci_low": 0.0, "ci_high": 0.4},
        "generalisation_gap": None,
    },
    "under_review": 2,
}
CALIBRATION: dict[str, Any] = {
    "calibration_set": "experts",
    "set_version": 2,
    "n": 120,
    "weighted_kappa": 0.91,
    "weighted_ci_low": 0.86,
    "weighted_ci_high": 0.95,
    "kappa": 0.74,
    "kappa_ci_low": 0.65,
    "kappa_ci_high": 0.82,
}
BOARD: dict[str, Any] = {
    "judge": "judge-a",
    "judges": ["judge-a", "judge-b", "judge-c"],
    "panel_rule": "median",
    "judge_calibration": CALIBRATION,
    "prompt_version": "v1",
    "anchor": {"model_id": "m1", "name": "model-one", "designated": False, "note": None},
    "confidence_level": 0.95,
    "tie_threshold": 0.95,
    "groups": [["model-one"]],
    "models": [FULL_ROW],
    "baselines": {
        "n_comparisons": 3,
        "note": None,
        "models": [{"model_id": "m1", "name": "model-one", "elo": 1500.0, "bt_log_strength": 0}],
    },
    "diagnostics": {
        "models": ["model-one"],
        "anisotropy_index": None,
        "rsa": None,
        "capability_inconsistency": {"model-one": 0.1},
        "unavailable": {"anisotropy_index": "fewer than 3 models"},
    },
}


def served(model: type[BaseModel], document: dict[str, Any]) -> dict[str, Any]:
    """``document`` as the API sends it: validated, unset fields left out."""
    sent: dict[str, Any] = model.model_validate(document).model_dump(
        mode="json", exclude_unset=True
    )
    return sent


def test_the_sdk_row_has_every_field_of_the_catalogue_in_its_order() -> None:
    """A row field declared in ``server.leaderboard.fields`` reaches the SDK's row too
    (which spells the fields itself: the SDK imports nothing of the server), and the
    round trip below carries every one of them."""
    row_fields = [f.name for f in dataclasses.fields(sdk.LeaderboardRow)]
    assert row_fields == ["model_id", *ROW_FIELDS]
    assert list(FULL_ROW) == row_fields


def test_the_sdk_reads_the_whole_leaderboard_as_the_server_sends_it() -> None:
    sent = served(LeaderboardOut, BOARD)
    board = sdk.Leaderboard.from_json(sent)
    assert board.to_json() == sent
    (row,) = board.models
    assert row.disciplines is not None and row.disciplines["math"].items == 12
    assert row.contamination is not None and row.contamination.replay is not None
    assert row.contamination.replay.near_exact == 1 and row.contamination.generalisation_gap is None
    assert board.baselines is not None and board.baselines.models[0].elo == 1500.0
    assert board["judge"] == "judge-a"  # the dict-style read of older SDK versions


def test_a_vendor_s_board_reads_with_the_hidden_fields_as_none() -> None:
    public = {"model_id", "position", "group", "rank_range", "name", "absolute", "sessions"}
    row = {k: v for k, v in FULL_ROW.items() if k in public}
    board = {k: v for k, v in BOARD.items() if k not in {"baselines", "diagnostics"}}
    sent = served(LeaderboardOut, {**board, "models": [row]})
    assert "latency" not in sent["models"][0] and "baselines" not in sent
    read = sdk.Leaderboard.from_json(sent)
    (read_row,) = read.models
    assert (read_row.latency, read_row.cost, read_row.organisation) == (None, None, None)
    assert read_row.absolute == sdk.ScoreSummary(**SCORE)
    assert (read.baselines, read.diagnostics) == (None, None)
    assert read.to_json() == {
        **sent,
        "models": [{**FULL_ROW, **{k: None for k in FULL_ROW if k not in public}}],
    }


def test_the_sdk_reads_the_discipline_view_as_the_server_sends_it() -> None:
    entry = {"model_id": "m1", "name": None, "score": 6.1, "standard_error": 0.4, "items": 12}
    document = {
        "judge": "judge-a",
        "judges": ["judge-a"],
        "panel_rule": "median",
        "judge_calibration": None,
        "prompt_version": "v1",
        "scale": 10,
        "disciplines": [{"discipline": "math", "models": [entry]}],
    }
    sent = served(DisciplinesOut, document)
    view = sdk.DisciplineLeaderboard.from_json(sent)
    assert view.disciplines[0].models[0] == sdk.DisciplineEntry(**entry)
    assert view.to_json() == sent


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "Leaderboard: expected a JSON object, got list"),
        ({**BOARD, "models": {"m1": FULL_ROW}}, "Leaderboard.models: expected a JSON array"),
        ({**BOARD, "models": [{"name": "x"}]}, "LeaderboardRow: missing model_id"),
        ({**BOARD, "anchor": "m1"}, "Anchor: expected a JSON object, got str"),
        ({**BOARD, "groups": ["model-one"]}, "Leaderboard.groups"),
        ({k: v for k, v in BOARD.items() if k != "judge"}, "Leaderboard: missing judge"),
    ],
)
def test_a_malformed_leaderboard_is_refused_with_what_is_wrong(document: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        sdk.Leaderboard.from_json(document)


def test_whoami_reads_into_the_role_enum() -> None:
    sent = served(
        WhoAmI, {"subject": "k1", "org_id": str(uuid.uuid4()), "role": "vendor", "session_id": None}
    )
    identity = sdk.Identity.from_json(sent)
    assert identity.role is sdk.Role.VENDOR and identity.session_id is None
    assert identity["role"] == "vendor"
    # a role a newer server added arrives as its string (an older SDK keeps working)
    newer = sdk.Identity.from_json({**sent, "role": "janitor"})
    assert newer.role == "janitor" and not isinstance(newer.role, sdk.Role)
    with pytest.raises(TypeError, match="Role: expected a string"):
        sdk.Identity.from_json({**sent, "role": None})


@pytest.mark.parametrize(
    "source",
    [
        {"kind": "stratified", "disciplines": ["law", "math"]},
        {"kind": "anchor"},
        {"kind": "item_set", "item_set_id": str(uuid.UUID(int=5))},
    ],
)
def test_the_sdk_verifies_a_reveal_as_the_server_sends_it(source: dict[str, Any]) -> None:
    """The route leaves unset fields out, so the source arrives with its recorded keys only
    and hashes to what the server committed to."""
    from bank.sampling.commitment import commitment
    from clients.sdk import verify_commitment

    items = [uuid.UUID(int=1), uuid.UUID(int=2)]
    promised = commitment(seed="s" * 32, salt="t" * 32, source=source, item_ids=items)
    document = {
        "commitment": promised,
        "revealed": True,
        "seed": "s" * 32,
        "salt": "t" * 32,
        "source": source,
        "item_ids": items,
    }
    sent = served(CommitmentOut, document)
    assert sent["source"] == source
    reveal = sdk.CommitmentReveal.from_json(sent)
    assert verify_commitment(reveal, [(1, str(items[1]))], expected_commitment=promised).ok
