"""The Proctor SDK: ``ProctorClient`` (blocking) and ``AsyncProctorClient`` (asyncio) over
httpx, the response types and the exception tree (:mod:`clients.sdk.errors`).

::

    from clients.sdk import ProctorClient, Usage

    with ProctorClient("https://proctor.example", api_key="pk_...") as client:
        session = client.create_session(model_id=MODEL_ID)
        for item in client.items(session.id):
            reply = my_model(item.question, item.options)
            client.submit_answer(
                session.id, item, reply.text, usage=Usage(reply.prompt_tokens, reply.output_tokens)
            )
        print(client.wait_scored(session.id))

``session.commitment`` binds the server to the sample before any item is delivered; once
the session is scored, ``verify_commitment(client.get_commitment(session.id), items,
expected_commitment=session.commitment)`` checks it (:mod:`clients.sdk.commitment`).
"""

from __future__ import annotations

from clients.sdk._version import __version__
from clients.sdk.async_client import AsyncProctorClient
from clients.sdk.client import ProctorClient
from clients.sdk.commitment import CommitmentCheck, commitment_of, verify_commitment
from clients.sdk.errors import (
    AlreadyAnsweredError,
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    NotPendingError,
    PermissionDeniedError,
    ProctorError,
    QuotaExhaustedError,
    RateLimitError,
    ServiceUnavailableError,
    SessionClosedError,
    SessionInUseError,
    ValidationError,
    error_from_response,
)
from clients.sdk.types import (
    Accepted,
    AdaptiveBound,
    AdaptiveOptions,
    AdaptivePolicy,
    AdaptiveSummary,
    Anchor,
    BaselineRating,
    Baselines,
    CallFailure,
    CommitmentReveal,
    Contamination,
    Cost,
    Diagnostics,
    DisciplineBoard,
    DisciplineEntry,
    DisciplineEstimate,
    DisciplineLeaderboard,
    DisciplineScore,
    EndpointCheck,
    EndpointSettings,
    FinishReason,
    GeneralisationGap,
    Identity,
    Item,
    ItemState,
    JudgeCalibration,
    Latency,
    Leaderboard,
    LeaderboardRow,
    Model,
    ModelApi,
    ModelEndpoint,
    ReplayRate,
    Role,
    Run,
    RunSessionProgress,
    RunState,
    SampleSource,
    ScoreSummary,
    ScoringProgress,
    Session,
    SessionMode,
    SessionState,
    StopReason,
    Usage,
)

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "Accepted",
    "AdaptiveBound",
    "AdaptiveOptions",
    "AdaptivePolicy",
    "AdaptiveSummary",
    "AlreadyAnsweredError",
    "Anchor",
    "AsyncProctorClient",
    "AuthenticationError",
    "BaselineRating",
    "Baselines",
    "CallFailure",
    "CommitmentCheck",
    "CommitmentReveal",
    "ConflictError",
    "Contamination",
    "Cost",
    "Diagnostics",
    "DisciplineBoard",
    "DisciplineEntry",
    "DisciplineEstimate",
    "DisciplineLeaderboard",
    "DisciplineScore",
    "EndpointCheck",
    "EndpointSettings",
    "FinishReason",
    "GeneralisationGap",
    "Identity",
    "InternalServerError",
    "Item",
    "ItemState",
    "JudgeCalibration",
    "Latency",
    "Leaderboard",
    "LeaderboardRow",
    "Model",
    "ModelApi",
    "ModelEndpoint",
    "NotFoundError",
    "NotPendingError",
    "PermissionDeniedError",
    "ProctorClient",
    "ProctorError",
    "QuotaExhaustedError",
    "RateLimitError",
    "ReplayRate",
    "Role",
    "Run",
    "RunSessionProgress",
    "RunState",
    "SampleSource",
    "ScoreSummary",
    "ScoringProgress",
    "ServiceUnavailableError",
    "Session",
    "SessionClosedError",
    "SessionInUseError",
    "SessionMode",
    "SessionState",
    "StopReason",
    "Usage",
    "ValidationError",
    "__version__",
    "commitment_of",
    "error_from_response",
    "verify_commitment",
]
