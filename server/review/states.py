"""The review queue's vocabulary: why an answer is queued and the states of a task."""

from __future__ import annotations

from enum import StrEnum


class ReviewReason(StrEnum):
    """Why an answer is in the review queue (the first reason found is kept)."""

    NEEDS_REVIEW = "needs_review"
    """The judge could not give a verdict: the answer has no score until a person gives one."""
    DISAGREEMENT = "disagreement"
    """The panel's judges differ by ``review_disagreement_points`` or more."""
    AUDIT = "audit"
    """Drawn for the audit sample: the judge is checked where it did not complain."""


class ReviewTaskState(StrEnum):
    OPEN = "open"
    DONE = "done"
