"""The similarity filter of the scoring cascade (ReLE §3.2, step 1).

For semi-objective items the cascade compares an answer the objective matchers could not
decide with the reference: a confident match is scored correct, a confident mismatch wrong,
and the ambiguous middle goes to the LLM judge. The paper uses BGE-M3 embeddings (its
thresholds were lost in the text extraction); this module ships a model-free lexical
backend and leaves embeddings behind the :class:`SimilarityBackend` protocol.

Lexical similarity (:func:`lexical_similarity`) of an answer ``a`` to a reference ``b``, in
[0, 1]:

1. Normalise both texts: NFKC, casefold, punctuation and symbols become spaces.
2. Tokens: Latin/digit words (``[a-z0-9]+`` runs) and, for each run of CJK characters, its
   character bigrams (a lone CJK character is a unigram). Chinese has no spaces, so
   bigrams play the role of words.
3. ``token_f1``: F1 of the two token multisets (precision and recall of the overlap).
4. ``char_dice``: Dice coefficient of character n-gram multisets - 3-grams of each Latin
   word padded with ``#`` (so ``no`` -> ``#no``, ``no#``) and the CJK bigrams. It rewards
   near-spellings (``colour``/``color``) that token F1 misses.
5. ``base = (token_f1 + char_dice) / 2``. The mean, not the max: character overlap alone
   (``photosynthesis`` vs ``photosynthetic``) must not reach a confident match.
6. Containment (one-directional): when the whole normalised reference ``b`` occurs in
   the normalised answer ``a`` as whole words (``"3"`` is not found in ``"35"``; CJK text
   has no word boundaries, so there it is a plain substring), the answer states the
   reference and explains it, and the similarity is exactly 1.0. If the rest of the answer
   negates or hedges (``not``, ``no``, ``never``, ``isn't``, ``instead``, ``rather``,
   ``or``, ``maybe``, ``wrong``, ``不是``, ``并非``, ``而非``, ``不对``, ``错误``, ``没有``,
   ``或``, ``可能``...) the containment only guarantees 0.5, which is ambiguous under any
   sensible thresholds ("it is not Paris" contains "Paris" but is no match). A fragment
   of the reference inside the answer gets no such help, nor does the answer inside the
   reference (a fragment of a long reference is not a match), so the function is
   symmetric except for containment.

Two empty texts are identical (1.0); one empty text against a non-empty one scores 0.0.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

__all__ = [
    "LexicalBackend",
    "SimilarityBackend",
    "SimilarityFilter",
    "Verdict",
    "char_ngram_dice",
    "lexical_similarity",
    "token_f1",
]

Verdict = Literal["match", "mismatch", "ambiguous"]

_CJK = (
    r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
    r"\U00020000-\U0002ffff"
)
_WORD_OR_CJK = re.compile(r"[a-z0-9]+|[" + _CJK + r"]+")
_IS_CJK = re.compile(r"[" + _CJK + r"]")
_NEGATION_OR_HEDGE = re.compile(
    r"\b(?:not|no|never|none|nor|isn't|isnt|aren't|wasn't|weren't|doesn't|don't|didn't|"
    r"cannot|can't|instead|rather|or|maybe|perhaps|possibly|wrong|incorrect|false)\b"
    r"|不是|并非|而非|并不|不对|不正确|错误|没有|而不是|不能|不应|或者|或|可能|也许",
)
_ANSWER_LABEL = re.compile(
    r"^\s*(?:(?:the\s+)?(?:final\s+)?answer\s*(?:is\b|:)|最终答案|答案|答)\s*(?:(?:是|为|:)\s*)?",
    re.IGNORECASE,
)


def _normalise(text: str) -> str:
    """NFKC, casefold; punctuation, symbols and whitespace runs become single spaces."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = [
        " " if unicodedata.category(char)[0] in "PSZC" else char  # punctuation, symbols, space
        for char in folded
    ]
    return " ".join("".join(kept).split())


def _units(normalised: str, word_units: Callable[[str], Iterable[str]]) -> Counter[str]:
    """Counts of the units of ``normalised``: each CJK run as its character bigrams (a lone
    character as itself), each other run as ``word_units`` of it."""
    units: Counter[str] = Counter()
    for run in _WORD_OR_CJK.findall(normalised):
        if not _IS_CJK.match(run):
            units.update(word_units(run))
        elif len(run) == 1:
            units[run] += 1
        else:
            units.update(run[i : i + 2] for i in range(len(run) - 1))
    return units


def _padded_trigrams(word: str) -> list[str]:
    padded = f"#{word}#"
    return [padded[i : i + 3] for i in range(len(padded) - 2)]


def _tokens(normalised: str) -> Counter[str]:
    return _units(normalised, lambda word: (word,))


def _char_ngrams(normalised: str) -> Counter[str]:
    return _units(normalised, _padded_trigrams)


def _overlap_f1(left: Counter[str], right: Counter[str]) -> float:
    if not left and not right:
        return 1.0
    if not left or not right:
        return 0.0
    common = sum((left & right).values())
    return 2.0 * common / (sum(left.values()) + sum(right.values()))


def token_f1(a: str, b: str) -> float:
    """F1 of the word/CJK-bigram token multisets of ``a`` and ``b`` (see module doc)."""
    return _overlap_f1(_tokens(_normalise(a)), _tokens(_normalise(b)))


def char_ngram_dice(a: str, b: str) -> float:
    """Dice coefficient of the character n-gram multisets of ``a`` and ``b``."""
    return _overlap_f1(_char_ngrams(_normalise(a)), _char_ngrams(_normalise(b)))


def _containment(answer: str, reference: str) -> float:
    """1.0 / 0.5 / 0.0 by the containment rule of the module docstring (normalised input)."""
    if not reference:
        return 0.0
    found = re.search(r"(?<![a-z0-9])" + re.escape(reference) + r"(?![a-z0-9])", answer)
    if found is None:
        return 0.0
    rest = answer[: found.start()] + " " + answer[found.end() :]
    return 0.5 if _NEGATION_OR_HEDGE.search(rest) else 1.0


def lexical_similarity(a: str, b: str) -> float:
    """Model-free similarity of answer ``a`` to reference ``b``, in [0, 1].

    ``max(mean(token_f1, char_dice), containment(b in a))`` - see the module docstring.
    1.0 for texts equal after normalisation; symmetric except for the containment rule.
    """
    left, right = _normalise(a), _normalise(b)
    if left == right:
        return 1.0
    if not left or not right:
        return 0.0
    base = (
        _overlap_f1(_tokens(left), _tokens(right))
        + _overlap_f1(_char_ngrams(left), _char_ngrams(right))
    ) / 2.0
    return min(1.0, max(base, _containment(left, right)))


@runtime_checkable
class SimilarityBackend(Protocol):
    """Anything that scores two texts in [0, 1] (1 = same meaning).

    An embedding backend (e.g. BGE-M3 cosine similarity, clipped to [0, 1]) implements
    this protocol; none ships here because it needs a model.
    """

    def similarity(self, a: str, b: str) -> float:
        """Similarity of ``a`` and ``b`` in [0, 1]."""
        ...


@dataclass(frozen=True, slots=True)
class LexicalBackend:
    """:func:`lexical_similarity` as a :class:`SimilarityBackend`."""

    def similarity(self, a: str, b: str) -> float:
        """Similarity of ``a`` and ``b`` in [0, 1]."""
        return lexical_similarity(a, b)


@dataclass(frozen=True, slots=True)
class SimilarityFilter:
    """Step 1 of the hybrid cascade: auto-label confident matches and mismatches.

    ``decide`` returns ``"match"`` when the similarity is at least ``match_at``,
    ``"mismatch"`` when it is below ``mismatch_below``, and ``"ambiguous"`` (ask the
    judge) in between. A leading answer label (``Answer:``, ``答案：``) is stripped from
    the answer first. Defaults 0.85 / 0.15 are deliberately wide apart: the lexical
    backend only auto-labels near-verbatim answers and answers sharing nothing with the
    reference.

    Raises ValueError (naming the field) unless ``0 <= mismatch_below < match_at <= 1``,
    and from ``decide`` when the backend returns a value outside [0, 1] or NaN.
    """

    match_at: float = 0.85
    mismatch_below: float = 0.15
    backend: SimilarityBackend = field(default_factory=LexicalBackend)

    def __post_init__(self) -> None:
        for name in ("match_at", "mismatch_below"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name} must be a number, got {value!r}")
            if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                raise ValueError(f"{name} must be in [0, 1], got {value!r}")
        if not self.mismatch_below < self.match_at:
            raise ValueError(
                f"mismatch_below must be < match_at, got mismatch_below={self.mismatch_below}"
                f" and match_at={self.match_at}"
            )

    def decide(self, answer: str, reference: str) -> Verdict:
        """``"match"``, ``"mismatch"`` or ``"ambiguous"`` for ``answer`` vs ``reference``."""
        stripped = _ANSWER_LABEL.sub("", unicodedata.normalize("NFKC", answer), count=1)
        score = self.backend.similarity(stripped, reference)
        if not (isinstance(score, int | float) and math.isfinite(score) and 0.0 <= score <= 1.0):
            raise ValueError(f"similarity backend returned {score!r}, expected a value in [0, 1]")
        if score >= self.match_at:
            return "match"
        if score < self.mismatch_below:
            return "mismatch"
        return "ambiguous"
