"""The similarity filter of the hybrid cascade (papers/003 §3.2, step 1).

ReLE compares a semi-objective answer with the reference by embedding cosine similarity and
decides the confident ends without a judge. The default backend here is lexical and needs
no model: ``lexical_similarity`` is the larger of

* token F1 over words (English, lower-cased) and single CJK characters, and
* the Dice coefficient of character 3-grams (2-grams for CJK text) of the normalised texts,

and it is 1.0 when the reference's tokens occur as a run in the answer's (an answer that
states the reference and then explains itself must not look like a mismatch).
An embedding backend plugs in through ``SimilarityBackend``.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal, Protocol

Decision = Literal["match", "mismatch", "ambiguous"]

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN_RE = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+", re.UNICODE)
_DROP_RE = re.compile(r"[\W_]+", re.UNICODE)
_CJK_RE = re.compile(rf"[{_CJK}]")


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(_normalise(text))


def _token_f1(a: list[str], b: list[str]) -> float:
    if not a or not b:
        return 0.0
    common = sum((Counter(a) & Counter(b)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(a), common / len(b)
    return 2 * precision * recall / (precision + recall)


def _grams(text: str, n: int) -> Counter[str]:
    if len(text) < n:
        return Counter([text]) if text else Counter()
    return Counter(text[i : i + n] for i in range(len(text) - n + 1))


def _dice(a: str, b: str) -> float:
    n = 2 if _CJK_RE.search(a + b) else 3
    ga, gb = _grams(a, n), _grams(b, n)
    total = sum(ga.values()) + sum(gb.values())
    return 2 * sum((ga & gb).values()) / total if total else 0.0


def _contains(tokens: list[str], part: list[str]) -> bool:
    """Whether ``part`` occurs in ``tokens`` as a contiguous run (whole tokens only, so the
    reference "3" is not found in "35")."""
    n = len(part)
    return n > 0 and any(tokens[i : i + n] == part for i in range(len(tokens) - n + 1))


def lexical_similarity(a: str, b: str) -> float:
    """Similarity in [0, 1] of an answer ``a`` to a reference ``b`` (see the module
    docstring). Not symmetric in one case: the reference's tokens occurring in the answer
    count as 1.0, the answer's in the reference do not (a fragment of a long reference is
    not a match)."""
    tokens_a, tokens_b = _tokens(a), _tokens(b)
    if not tokens_a or not tokens_b:
        return 0.0
    if _contains(tokens_a, tokens_b):
        return 1.0
    flat_a, flat_b = _DROP_RE.sub("", _normalise(a)), _DROP_RE.sub("", _normalise(b))
    return max(_token_f1(tokens_a, tokens_b), _dice(flat_a, flat_b))


class SimilarityBackend(Protocol):
    """Anything that scores two texts in [0, 1] (e.g. embedding cosine similarity)."""

    def similarity(self, a: str, b: str) -> float: ...


class LexicalBackend:
    """``lexical_similarity`` as a backend: no model, no I/O."""

    def similarity(self, a: str, b: str) -> float:
        return lexical_similarity(a, b)


@dataclass(frozen=True)
class SimilarityFilter:
    """Decides the confident ends: ``match`` at or above ``match_at``, ``mismatch`` below
    ``mismatch_below``, ``ambiguous`` (ask the judge) in between."""

    match_at: float = 0.85
    mismatch_below: float = 0.15
    backend: SimilarityBackend = field(default_factory=LexicalBackend)

    def __post_init__(self) -> None:
        if not 0.0 <= self.mismatch_below < self.match_at <= 1.0:
            raise ValueError(
                "similarity thresholds: need 0 <= mismatch_below < match_at <= 1, got "
                f"mismatch_below={self.mismatch_below}, match_at={self.match_at}"
            )

    def decide(self, answer: str, reference: str) -> Decision:
        score = self.backend.similarity(answer, reference)
        if score >= self.match_at:
            return "match"
        if score < self.mismatch_below:
            return "mismatch"
        return "ambiguous"
