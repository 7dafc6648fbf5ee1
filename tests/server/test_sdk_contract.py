"""The SDK's response types and the server's response models describe the same bodies.

The wire vocabulary (states, modes, roles, adaptive policies and bounds) is written once,
in ``clients.sdk.types``, and the server imports it; the response shapes exist twice (the
server's pydantic models document them in OpenAPI, the SDK's dataclasses parse them, and
the SDK may import nothing of the server). These tests keep the two sides equal, and the
adaptive vocabulary equal to the statistics it names in ``bank.adaptive``.
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum

import pytest
from pydantic import BaseModel

from bank.adaptive.bounds import Bound
from bank.adaptive.policy import Policy
from bank.adaptive.policy import StopReason as BankStopReason
from clients.sdk import types as sdk
from server.auth.permissions import ROLE_PERMISSIONS
from server.auth.schemas import WhoAmI
from server.config import Settings
from server.registry.schemas import ModelOut
from server.scoring.schemas import ScoringOut
from server.sessions import states
from server.sessions.schemas import (
    AdaptiveOptions,
    AdaptiveOut,
    AnswerAccepted,
    ItemOut,
    SessionOut,
)

PAIRS: list[tuple[type, type[BaseModel], set[str]]] = [
    (sdk.Model, ModelOut, set()),
    (sdk.Session, SessionOut, set()),
    (sdk.AdaptiveSummary, AdaptiveOut, set()),
    (sdk.Item, ItemOut, set()),
    (sdk.Accepted, AnswerAccepted, {"already_answered"}),
    (sdk.ScoringProgress, ScoringOut, set()),
]


@pytest.mark.parametrize(
    ("sdk_type", "model", "client_only"),
    PAIRS,
    ids=lambda p: p.__name__ if isinstance(p, type) else "",
)
def test_every_field_the_server_sends_is_read_by_the_sdk(
    sdk_type: type, model: type[BaseModel], client_only: set[str]
) -> None:
    sdk_fields = {f.name for f in dataclasses.fields(sdk_type)}
    assert sdk_fields - client_only == set(model.model_fields)


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
    assert {state for state in every if not states.SESSION_TRANSITIONS[state]} == sdk.FINAL_STATES


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
            "new_field": 1,
        }
    )
    assert summary.policy is sdk.AdaptivePolicy.NEYMAN_IRT and summary.policy == "neyman-irt"
    assert summary["stop_reason"] == "precise"  # the dict-style read of older SDK versions
    with pytest.raises(KeyError):
        summary["new_field"]
