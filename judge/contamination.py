"""Contamination checks: fill-in replay and the generalisation gap on a private anchor set.

Two signals that a model has seen the items it is evaluated on (DESIGN "Contamination"):

* **Fill-in replay** (papers/004 §3.3, Finding 6 and table 4). The model is shown the
  beginning of an item and asked to continue it exactly as it appears in its source; a
  model that reproduces the hidden end (near-)verbatim has most likely seen the item. The
  paper counts successful completions over 1,000 questions with three attempts each and
  finds far more of them on public benchmarks (AGIEval, C-Eval) than on its private bank.
  It does not describe the matching rule; this module follows the masking-and-completion
  idea of Deng et al. (2024, "Investigating data contamination in modern benchmarks for
  large language models", NAACL) and the exact n-gram continuation of Xu et al. (2024,
  "Benchmarking benchmark leakage in large language models"), relaxed to a near-exact
  match so that a stray character or a normalisation difference does not hide a replay:

  - :func:`mask_question` hides the end of an item (:class:`MaskedText`);
  - :func:`replay_prompt` is the instruction sent with the visible prefix;
  - :func:`completion_match` compares the model's continuation with the hidden end
    (:class:`ReplayMatch`), :func:`levenshtein` and :func:`replay_units` being its parts;
  - :func:`replay_rate` is the share of near-exact completions with a Clopper-Pearson
    interval (:class:`ReplayRate`).

* **Generalisation gap** (papers/003 §4.3, "Private Held-out Validation"). A private
  anchor set, never served in ordinary sessions, is scored next to the public item set;
  ``gap = score(public) - score(anchor)``, models whose gap exceeds a threshold are flagged
  for potential overfitting, and a flagged model reports the lower bound of its
  performance interval (:func:`generalisation_gap`, :class:`GapReport`). Because the two
  sets differ in difficulty for *every* model, the flag is raised on the gap in excess of
  the median gap over all models, not on the raw gap.

Units
-----
Texts are measured in *units*: every wide character (East Asian width ``W`` or ``F``:
CJK ideographs, kana, Hangul syllables, full-width forms) is one unit, and every run of
other non-whitespace characters is one unit (a word). Chinese text is thus counted in
characters and English text in words; mixed text (``使用Python语言``) gives one sequence
``使 用 Python 语 言``. Masking and matching count units slightly differently, as each
needs (see :func:`mask_question` and :func:`replay_units`).

Every function is pure: no I/O, no randomness, no clock.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from statistics import NormalDist
from typing import Literal

from scipy.stats import beta

__all__ = [
    "MAX_MATCH_UNITS",
    "MIN_MODELS_FOR_MEDIAN",
    "GapReport",
    "MaskedText",
    "ModelGap",
    "ReplayMatch",
    "ReplayRate",
    "ScoreEstimate",
    "Unit",
    "completion_match",
    "generalisation_gap",
    "levenshtein",
    "mask_question",
    "replay_prompt",
    "replay_rate",
    "replay_units",
]

Unit = Literal["character", "word", "mixed"]
"""How a masked text was counted: CJK characters, words, or both in one sequence."""

MAX_MATCH_UNITS = 512
""":func:`completion_match` compares at most this many units of the hidden part (and as
many of the completion), which bounds its Levenshtein table to 512 x 512 cells."""

MIN_MODELS_FOR_MEDIAN = 3
""":func:`generalisation_gap` measures gaps against the median gap from this many models."""


# --- validation -------------------------------------------------------------------------


def _check_fraction(value: object, name: str) -> float:
    """A float strictly inside (0, 1)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")
    number = float(value)
    if not 0.0 < number < 1.0:  # also refuses NaN
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {number!r}")
    return number


def _check_unit_interval(value: object, name: str) -> float:
    """A float in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    number = float(value)
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {number!r}")
    return number


def _check_finite(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {number!r}")
    return number


def _check_count(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    number = int(value)
    if number < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {number}")
    return number


def _check_text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}")
    return value


def _z(confidence_level: float) -> float:
    """The two-sided normal quantile: 1.96 for 0.95."""
    return NormalDist().inv_cdf(1.0 - (1.0 - confidence_level) / 2.0)


# --- units ------------------------------------------------------------------------------


def _is_wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in ("W", "F")


def _is_content(char: str) -> bool:
    """A letter or a digit (Unicode categories L* and N*)."""
    return unicodedata.category(char)[0] in "LN"


def _unit_starts(text: str) -> tuple[list[int], set[str]]:
    """Start offsets of the content units of ``text`` and the kinds of unit found.

    A unit is a wide letter/digit, or a run of non-whitespace, non-wide characters holding
    at least one letter or digit. Runs without one (``-``, ``，``, ``“``) are no unit of
    their own: they belong to the unit before them.
    """
    starts: list[int] = []
    kinds: set[str] = set()
    i, length = 0, len(text)
    while i < length:
        char = text[i]
        if char.isspace():
            i += 1
        elif _is_wide(char):
            if _is_content(char):
                starts.append(i)
                kinds.add("character")
            i += 1
        else:
            j = i
            while j < length and not text[j].isspace() and not _is_wide(text[j]):
                j += 1
            if any(_is_content(c) for c in text[i:j]):
                starts.append(i)
                kinds.add("word")
            i = j
    return starts, kinds


# --- masking ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MaskedText:
    """An item cut into a visible prefix and a hidden end (papers/004 §3.3).

    ``prefix + separator + hidden`` is the original text, character for character.

    Attributes
    ----------
    prefix : str
        The visible beginning, with its original spacing; trailing whitespace moves to
        ``separator``.
    hidden : str
        The hidden end, starting on a unit (a CJK character or a word), never on
        whitespace or on a punctuation mark standing on its own.
    separator : str
        The whitespace between the two (empty for CJK text, usually one space otherwise).
    unit : {"character", "word", "mixed"}
        How the text was counted: CJK characters, words, or both.
    units : int
        Units in the whole text.
    hidden_units : int
        Units in ``hidden``.
    """

    prefix: str
    hidden: str
    separator: str
    unit: Unit
    units: int
    hidden_units: int


def mask_question(
    text: str,
    *,
    hidden_fraction: float = 0.5,
    min_hidden: int = 8,
    min_prefix: int = 1,
) -> MaskedText:
    """Hide the end of an item for a fill-in replay test (papers/004 §3.3, Finding 6).

    The text is cut into units (module docstring): each wide character (CJK) is a unit,
    each run of other non-whitespace characters is a unit (a word), and punctuation or
    symbols standing on their own (``，``, ``-``, an opening quote) belong to the unit
    before them, so that ``hidden`` never starts with a lone punctuation mark. Of ``n``
    units the last

    .. math:: h = \\min(\\max(\\lceil f \\cdot n \\rceil, \\text{min_hidden}),
              n - \\text{min_prefix})

    are hidden, ``f`` being ``hidden_fraction``. The cut falls on a unit boundary and
    nothing else is changed: ``prefix + separator + hidden == text``.

    Parameters
    ----------
    text : str
        The item (typically its question), in any language.
    hidden_fraction : float, default 0.5
        Share of the units to hide, in (0, 1); rounded up.
    min_hidden : int, default 8
        The fewest units worth hiding: a shorter continuation can be guessed without
        having seen the item. At least 1.
    min_prefix : int, default 1
        The fewest units left visible. At least 1.

    Returns
    -------
    MaskedText

    Raises
    ------
    ValueError
        ``text`` is not a string or has fewer than ``min_hidden + min_prefix`` units (too
        short to mask), ``hidden_fraction`` is not in (0, 1), or ``min_hidden`` or
        ``min_prefix`` is not an integer of at least 1.

    Examples
    --------
    >>> masked = mask_question("The quick brown fox jumps over the lazy dog", min_hidden=3)
    >>> masked.prefix, masked.hidden
    ('The quick brown fox', 'jumps over the lazy dog')
    >>> masked = mask_question("光合作用的产物是葡萄糖和氧气。", min_hidden=4)
    >>> masked.prefix, masked.hidden, masked.unit
    ('光合作用的产物', '是葡萄糖和氧气。', 'character')
    """
    _check_text(text, "text")
    fraction = _check_fraction(hidden_fraction, "hidden_fraction")
    floor = _check_count(min_hidden, "min_hidden", 1)
    keep = _check_count(min_prefix, "min_prefix", 1)
    starts, kinds = _unit_starts(text)
    n = len(starts)
    if n < floor + keep:
        raise ValueError(
            f"text is too short to mask: it has {n} unit(s) (CJK characters or words), "
            f"masking needs at least {floor + keep} ({keep} visible + {floor} hidden)"
        )
    # round() first so that e.g. 0.3 * 10 = 3.0000000000000004 hides 3 units, not 4
    hidden = min(max(math.ceil(round(fraction * n, 9)), floor), n - keep)
    cut = starts[n - hidden]
    head = text[:cut]
    prefix = head.rstrip()
    unit: Unit = "mixed" if len(kinds) == 2 else ("character" if "character" in kinds else "word")
    return MaskedText(
        prefix=prefix,
        hidden=text[cut:],
        separator=head[len(prefix) :],
        unit=unit,
        units=n,
        hidden_units=hidden,
    )


_PROMPTS = {
    "en": (
        "The following text is the beginning of a question from an exam or a benchmark. "
        "Continue it exactly as it appears in its original source, word for word. "
        "Output only the continuation: do not repeat the beginning, do not answer the "
        "question and do not add any explanation.\n\n"
        "Beginning:\n{prefix}"
    ),
    "zh": (
        "下面是一道考试题或评测题目的开头部分。请按照它在原始出处中的原文，一字不差地续写其余部分。"
        "只输出续写的内容：不要重复开头，不要回答题目，也不要添加任何解释。\n\n"
        "开头：\n{prefix}"
    ),
}


def replay_prompt(prefix: str, *, language: str) -> str:
    """The instruction of a fill-in replay test (papers/004 §3.3, Finding 6).

    Asks the model to continue ``prefix`` exactly as in its source and to output only the
    continuation. The prefix is embedded verbatim, on its own line at the end.

    Parameters
    ----------
    prefix : str
        The visible beginning, :attr:`MaskedText.prefix`; must contain some non-whitespace.
    language : str
        The item's language: the Chinese instruction for ``zh`` and its variants
        (``zh-CN``, ``zh-Hans``...), the English one otherwise (the convention of
        :func:`judge.prompts.template_for`).

    Returns
    -------
    str

    Raises
    ------
    ValueError
        ``prefix`` or ``language`` is not a string, or ``prefix`` is blank.
    """
    _check_text(prefix, "prefix")
    _check_text(language, "language")
    if not prefix.strip():
        raise ValueError("prefix is blank: a replay prompt needs a visible beginning")
    key = "zh" if language.strip().lower().startswith("zh") else "en"
    return _PROMPTS[key].format(prefix=prefix)


# --- matching ---------------------------------------------------------------------------


def replay_units(text: str) -> tuple[str, ...]:
    """The normalised units that :func:`completion_match` compares.

    NFKC, casefold; punctuation (Unicode category P), whitespace, control and format
    characters are dropped (they separate units); each wide character and each symbol
    (category S: ``+``, ``=``, ``^``...) is a unit, so ``x+y`` and ``x + y`` give the same
    units; every other run of characters is a unit (a word).

    Parameters
    ----------
    text : str

    Returns
    -------
    tuple of str

    Examples
    --------
    >>> replay_units("It's 3.14 = π，约等于圆周率。")
    ('it', 's', '3', '14', '=', 'π', '约', '等', '于', '圆', '周', '率')
    """
    _check_text(text, "text")
    folded = unicodedata.normalize("NFKC", text).casefold()
    units: list[str] = []
    word: list[str] = []
    for char in folded:
        kind = unicodedata.category(char)[0]
        if char.isspace() or kind in "PZC":
            separate, alone = True, False
        else:
            alone = kind == "S" or _is_wide(char)
            separate = alone
        if separate and word:
            units.append("".join(word))
            word.clear()
        if alone:
            units.append(char)
        elif not separate:
            word.append(char)
    if word:
        units.append("".join(word))
    return tuple(units)


def levenshtein(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance between two unit sequences.

    The fewest insertions, deletions and substitutions (each costing 1) that turn ``a``
    into ``b``, by the Wagner-Fischer dynamic programme kept to two rows: ``O(len(a) *
    len(b))`` time, ``O(min(len(a), len(b)))`` memory. A common prefix and suffix are
    stripped first, which does not change the distance. Strings are sequences of
    characters, so ``levenshtein("kitten", "sitting")`` works too.

    There is no size limit here; :func:`completion_match` caps both sides at
    :data:`MAX_MATCH_UNITS` units.

    Examples
    --------
    >>> levenshtein("kitten", "sitting")
    3
    >>> levenshtein(("the", "lazy", "dog"), ("the", "dog"))
    1
    """
    start = 0
    stop_a, stop_b = len(a), len(b)
    while start < stop_a and start < stop_b and a[start] == b[start]:
        start += 1
    while stop_a > start and stop_b > start and a[stop_a - 1] == b[stop_b - 1]:
        stop_a -= 1
        stop_b -= 1
    left, right = a[start:stop_a], b[start:stop_b]
    if len(left) < len(right):
        left, right = right, left
    if not right:
        return len(left)
    previous = list(range(len(right) + 1))
    for i, unit in enumerate(left, start=1):
        current = [i]
        for j, other in enumerate(right, start=1):
            current.append(
                min(
                    previous[j] + 1,  # delete unit
                    current[j - 1] + 1,  # insert other
                    previous[j - 1] + (unit != other),  # substitute (free if equal)
                )
            )
        previous = current
    return previous[-1]


@dataclass(frozen=True, slots=True)
class ReplayMatch:
    """How closely a completion reproduces the hidden end of an item.

    Attributes
    ----------
    similarity : float
        ``1 - distance / compared_units``, in [0, 1]; 1 is a verbatim replay.
    near_exact : bool
        ``similarity >= threshold``: the completion counts as a replay.
    distance : int
        Levenshtein distance, in units, between the (cut) completion and the hidden end.
    compared_units : int
        Units of the hidden end that were compared (at most :data:`MAX_MATCH_UNITS`).
    completion_units : int
        Units of the completion that were compared, after the cut to ``compared_units``.
    hidden_truncated : bool
        True if the hidden end had more than :data:`MAX_MATCH_UNITS` units and only its
        first :data:`MAX_MATCH_UNITS` were compared.
    echoed_prefix : bool
        True if the completion began by repeating the given prefix, which was dropped.
    threshold : float
        The threshold ``near_exact`` was decided with.
    """

    similarity: float
    near_exact: bool
    distance: int
    compared_units: int
    completion_units: int
    hidden_truncated: bool
    echoed_prefix: bool
    threshold: float


def completion_match(
    completion: str,
    hidden: str,
    *,
    threshold: float = 0.9,
    prefix: str | None = None,
) -> ReplayMatch:
    """Score a fill-in replay completion against the hidden end (papers/004 §3.3).

    1. Both texts become unit sequences by :func:`replay_units` (NFKC, casefold,
       whitespace collapsed, punctuation dropped; CJK characters and words as units).
    2. The hidden units are capped at :data:`MAX_MATCH_UNITS`.
    3. If ``prefix`` is given and the completion starts with all of its units (the model
       repeated the beginning despite the instruction), those units are dropped.
    4. The completion is cut to as many units as the hidden end: a model that goes on
       writing past the end of the item is not penalised.
    5. ``similarity = 1 - levenshtein(completion, hidden) / len(hidden)`` (over units; the
       cut completion is never longer than the hidden end, so this is the distance
       normalised by the longer side), and ``near_exact = similarity >= threshold``.

    An empty completion (or one with no units left) has similarity 0. Paraphrases score
    low: the measure rewards the same units in the same order, which is what replaying a
    memorised text produces.

    Parameters
    ----------
    completion : str
        The model's continuation.
    hidden : str
        The hidden end, :attr:`MaskedText.hidden`; must hold at least one unit.
    threshold : float, default 0.9
        Similarity from which a completion counts as near-exact, in [0, 1].
    prefix : str or None, default None
        The visible beginning that was shown; enables step 3.

    Returns
    -------
    ReplayMatch

    Raises
    ------
    ValueError
        A text that is not a string, a ``hidden`` without any unit (only punctuation or
        whitespace), or a ``threshold`` outside [0, 1].

    Examples
    --------
    >>> match = completion_match("jumps over the lazy dog. Answer: B", "jumps over the lazy dog")
    >>> match.similarity, match.near_exact
    (1.0, True)
    >>> completion_match("leaps above a sleepy hound", "jumps over the lazy dog").near_exact
    False
    """
    _check_text(completion, "completion")
    _check_text(hidden, "hidden")
    cutoff = _check_unit_interval(threshold, "threshold")
    if prefix is not None:
        _check_text(prefix, "prefix")
    target = replay_units(hidden)
    if not target:
        raise ValueError(
            "hidden has no units to compare (it is empty or only punctuation and whitespace)"
        )
    truncated = len(target) > MAX_MATCH_UNITS
    target = target[:MAX_MATCH_UNITS]
    candidate = replay_units(completion)
    echoed = False
    if prefix is not None:
        shown = replay_units(prefix)
        if shown and candidate[: len(shown)] == shown:
            candidate = candidate[len(shown) :]
            echoed = True
    candidate = candidate[: len(target)]
    distance = levenshtein(candidate, target)
    similarity = 1.0 - distance / len(target)
    return ReplayMatch(
        similarity=similarity,
        near_exact=similarity >= cutoff,
        distance=distance,
        compared_units=len(target),
        completion_units=len(candidate),
        hidden_truncated=truncated,
        echoed_prefix=echoed,
        threshold=cutoff,
    )


# --- replay rate ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplayRate:
    """Share of near-exact completions with an exact binomial interval.

    Attributes
    ----------
    n : int
        Items tested.
    near_exact : int
        Items whose completion was near-exact.
    rate : float
        ``near_exact / n``.
    ci_low, ci_high : float
        Clopper-Pearson interval of the rate, in [0, 1].
    confidence_level : float
        Coverage of the interval.
    """

    n: int
    near_exact: int
    rate: float
    ci_low: float
    ci_high: float
    confidence_level: float


def replay_rate(
    matches: Sequence[bool | ReplayMatch] | None = None,
    *,
    near_exact: int | None = None,
    n: int | None = None,
    confidence_level: float = 0.95,
) -> ReplayRate:
    """Replay rate with a Clopper-Pearson interval (papers/004 §3.3, table 4).

    Table 4 of papers/004 reports counts of successful completions; a rate with an exact
    binomial interval makes counts from different numbers of items comparable. With ``k``
    near-exact completions out of ``n`` and ``alpha = 1 - confidence_level``, the
    Clopper-Pearson (1934) interval is

    .. math:: [B(\\alpha/2;\\, k,\\, n-k+1),\\; B(1-\\alpha/2;\\, k+1,\\, n-k)]

    with ``B(q; a, b)`` the ``q`` quantile of the beta distribution, and the lower
    (upper) bound 0 (1) when ``k = 0`` (``k = n``). It is the interval of
    ``scipy.stats.binomtest(k, n).proportion_ci(method="exact")``.

    The interval assumes independent trials. With several attempts per item (the paper
    makes three), attempts at one item are not independent: give one outcome per item
    (e.g. near-exact in any attempt) rather than one per attempt.

    Parameters
    ----------
    matches : sequence of bool or ReplayMatch, optional
        One outcome per item: a bool, or a :class:`ReplayMatch` (its ``near_exact``).
    near_exact, n : int, optional
        The counts instead of ``matches``: ``0 <= near_exact <= n``, ``n >= 1``. Give
        either ``matches`` or both counts.
    confidence_level : float, default 0.95
        In (0, 1).

    Returns
    -------
    ReplayRate

    Raises
    ------
    ValueError
        Both or neither of ``matches`` and the counts, only one of the counts, no items,
        an outcome that is neither a bool nor a :class:`ReplayMatch`, counts that are not
        integers with ``0 <= near_exact <= n``, or a ``confidence_level`` outside (0, 1).

    Examples
    --------
    >>> rate = replay_rate(near_exact=0, n=1000)
    >>> rate.rate, rate.ci_low, round(rate.ci_high, 5)
    (0.0, 0.0, 0.00368)
    """
    level = _check_fraction(confidence_level, "confidence_level")
    if matches is not None:
        if near_exact is not None or n is not None:
            raise ValueError("give either matches or the counts near_exact and n, not both")
        if isinstance(matches, str | bytes):
            raise ValueError("matches must be a sequence of bool or ReplayMatch, got a string")
        hits = 0
        for i, outcome in enumerate(matches):
            if isinstance(outcome, ReplayMatch):
                hits += outcome.near_exact
            elif isinstance(outcome, bool):
                hits += outcome
            else:
                raise ValueError(f"matches[{i}] must be a bool or a ReplayMatch, got {outcome!r}")
        k, total = hits, len(matches)
        if total == 0:
            raise ValueError("matches is empty: a replay rate needs at least one item")
    else:
        if near_exact is None or n is None:
            raise ValueError("give either matches or both counts near_exact and n")
        total = _check_count(n, "n", 1)
        k = _check_count(near_exact, "near_exact", 0)
        if k > total:
            raise ValueError(f"near_exact ({k}) cannot exceed n ({total})")
    alpha = 1.0 - level
    low = 0.0 if k == 0 else float(beta.ppf(alpha / 2.0, k, total - k + 1))
    high = 1.0 if k == total else float(beta.ppf(1.0 - alpha / 2.0, k + 1, total - k))
    return ReplayRate(
        n=total,
        near_exact=k,
        rate=k / total,
        ci_low=low,
        ci_high=high,
        confidence_level=level,
    )


# --- generalisation gap -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScoreEstimate:
    """A model's score on one item set and its standard error, on the 0-100 scale.

    Attributes
    ----------
    mean : float
        The score (e.g. the absolute score ``S`` of papers/004 eq. 1); finite.
    standard_error : float
        Its standard error, finite and at least 0 (e.g. from the bootstrap of
        :mod:`judge.ranking.stability`).

    Raises
    ------
    ValueError
        A value that is not a finite number, or a negative standard error.
    """

    mean: float
    standard_error: float

    def __post_init__(self) -> None:
        mean = _check_finite(self.mean, "ScoreEstimate.mean")
        error = _check_finite(self.standard_error, "ScoreEstimate.standard_error")
        if error < 0:
            raise ValueError(f"ScoreEstimate.standard_error must be at least 0, got {error!r}")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "standard_error", error)


@dataclass(frozen=True, slots=True)
class ModelGap:
    """One model's generalisation gap (papers/003 §4.3).

    Attributes
    ----------
    model : str
    public, anchor : ScoreEstimate
        Its scores on the public item set and on the private anchor set.
    gap : float
        ``public.mean - anchor.mean``.
    standard_error : float
        ``sqrt(public.standard_error**2 + anchor.standard_error**2)`` (the two sets are
        scored independently).
    excess : float
        ``gap - median gap`` (or ``gap`` with fewer than :data:`MIN_MODELS_FOR_MEDIAN`
        models, see :attr:`GapReport.relative_to_median`).
    excess_lower : float
        ``excess - z * standard_error``, the lower confidence bound of the excess.
    flagged : bool
        ``excess > threshold`` and ``excess_lower > 0``: potential overfitting.
    reported_score : float
        ``public.mean - z * public.standard_error`` (the lower bound of the public score's
        interval) if flagged, else ``public.mean``.
    """

    model: str
    public: ScoreEstimate
    anchor: ScoreEstimate
    gap: float
    standard_error: float
    excess: float
    excess_lower: float
    flagged: bool
    reported_score: float


@dataclass(frozen=True, slots=True)
class GapReport:
    """Generalisation gaps of all models (papers/003 §4.3).

    Attributes
    ----------
    models : tuple of ModelGap
        Models present in both maps, in the order of the public map.
    median_gap : float or None
        Median of the gaps of ``models``; None when no model is in both maps.
    relative_to_median : bool
        True if ``excess`` is measured from ``median_gap`` (at least
        :data:`MIN_MODELS_FOR_MEDIAN` models); False if ``excess`` is the raw gap, too few
        models being available to estimate the difference in difficulty of the two sets.
    missing : tuple of str
        Models present in only one map (public-map order, then anchor-map order); they
        get no gap and no flag.
    threshold : float
        The flagging threshold, in points of the 0-100 scale.
    confidence_level : float
    z : float
        The two-sided normal quantile of ``confidence_level`` (1.96 for 0.95).
    """

    models: tuple[ModelGap, ...]
    median_gap: float | None
    relative_to_median: bool
    missing: tuple[str, ...]
    threshold: float
    confidence_level: float
    z: float

    @property
    def flagged(self) -> tuple[str, ...]:
        """The flagged models, in report order."""
        return tuple(m.model for m in self.models if m.flagged)

    def get(self, model: str) -> ModelGap:
        """The entry of ``model``; KeyError if it is not in both maps."""
        for entry in self.models:
            if entry.model == model:
                return entry
        raise KeyError(model)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2.0


def _check_estimates(
    estimates: Mapping[str, ScoreEstimate], name: str
) -> Mapping[str, ScoreEstimate]:
    if not isinstance(estimates, Mapping):
        raise ValueError(f"{name} must be a mapping of model to ScoreEstimate")
    for model, estimate in estimates.items():
        if not isinstance(model, str) or not model:
            raise ValueError(f"{name}: model names must be non-empty strings, got {model!r}")
        if not isinstance(estimate, ScoreEstimate):
            raise ValueError(
                f"{name}[{model!r}] must be a ScoreEstimate, got {type(estimate).__name__}"
            )
    return estimates


def generalisation_gap(
    public: Mapping[str, ScoreEstimate],
    private_anchor: Mapping[str, ScoreEstimate],
    *,
    threshold: float = 5.0,
    confidence_level: float = 0.95,
) -> GapReport:
    """Generalisation gap against a private anchor set (papers/003 §4.3).

    papers/003 scores every model on a Private Anchor Set that is never published,
    computes the generalisation gap ``gap = score(public) - score(anchor)``, flags models
    whose gap exceeds a threshold for potential overfitting and reports the lower bound of
    their performance interval. Here, for each model in both maps:

    * ``gap = public.mean - anchor.mean`` and
      ``se = sqrt(public.standard_error**2 + anchor.standard_error**2)``;
    * ``excess = gap - median(gap over all models)``: the two sets differ in difficulty
      for every model, so a gap shared by all models is no sign of contamination, and
      only what a model gains beyond the typical gap is. With fewer than
      :data:`MIN_MODELS_FOR_MEDIAN` models the median says nothing and
      ``excess = gap`` (``GapReport.relative_to_median`` is False);
    * ``flagged = excess > threshold and excess - z * se > 0``, ``z`` the two-sided
      normal quantile of ``confidence_level``: the excess must be both large and
      significant. The uncertainty of the median itself is neglected;
    * ``reported_score = public.mean - z * public.standard_error`` for a flagged model
      (the lower bound of its public score's interval), ``public.mean`` otherwise.

    Parameters
    ----------
    public : mapping of str to ScoreEstimate
        Model -> score on the public (served) item set, 0-100 scale.
    private_anchor : mapping of str to ScoreEstimate
        Model -> score on the private anchor set, same scale.
    threshold : float, default 5.0
        Excess, in points, above which a model may be flagged; finite and at least 0.
    confidence_level : float, default 0.95
        In (0, 1); sets ``z``.

    Returns
    -------
    GapReport
        Models in both maps, in ``public`` order, and those in only one map under
        ``missing``.

    Raises
    ------
    ValueError
        A map that is not a mapping of non-empty model names to :class:`ScoreEstimate`,
        a ``threshold`` that is negative or not finite, or a ``confidence_level`` outside
        (0, 1).

    Examples
    --------
    >>> public = {"a": ScoreEstimate(70, 1), "b": ScoreEstimate(60, 1), "c": ScoreEstimate(80, 1)}
    >>> anchor = {"a": ScoreEstimate(65, 1), "b": ScoreEstimate(55, 1), "c": ScoreEstimate(60, 1)}
    >>> report = generalisation_gap(public, anchor)
    >>> report.median_gap, report.flagged, round(report.get("c").reported_score, 2)
    (5.0, ('c',), 78.04)
    """
    _check_estimates(public, "public")
    _check_estimates(private_anchor, "private_anchor")
    limit = _check_finite(threshold, "threshold")
    if limit < 0:
        raise ValueError(f"threshold must be at least 0, got {limit!r}")
    level = _check_fraction(confidence_level, "confidence_level")
    z = _z(level)
    common = [m for m in public if m in private_anchor]
    missing = tuple(m for m in public if m not in private_anchor) + tuple(
        m for m in private_anchor if m not in public
    )
    gaps = {m: public[m].mean - private_anchor[m].mean for m in common}
    median_gap = _median(list(gaps.values())) if gaps else None
    relative = median_gap is not None and len(gaps) >= MIN_MODELS_FOR_MEDIAN
    entries: list[ModelGap] = []
    for model in common:
        pub, anchor = public[model], private_anchor[model]
        gap = gaps[model]
        error = math.hypot(pub.standard_error, anchor.standard_error)
        excess = gap - median_gap if relative and median_gap is not None else gap
        excess_lower = excess - z * error
        flagged = excess > limit and excess_lower > 0
        entries.append(
            ModelGap(
                model=model,
                public=pub,
                anchor=anchor,
                gap=gap,
                standard_error=error,
                excess=excess,
                excess_lower=excess_lower,
                flagged=flagged,
                reported_score=pub.mean - z * pub.standard_error if flagged else pub.mean,
            )
        )
    return GapReport(
        models=tuple(entries),
        median_gap=median_gap,
        relative_to_median=relative,
        missing=missing,
        threshold=limit,
        confidence_level=level,
        z=z,
    )
