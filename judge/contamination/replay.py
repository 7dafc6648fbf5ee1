"""Fill-in replay: has a model memorised the items it is evaluated on?

The model is shown the beginning of an item and asked to continue it exactly as it appears
in its source; a model that reproduces the hidden end (near-)verbatim has most likely seen
the item. Zhang et al., "LLMEval-Fair: A Large-Scale Longitudinal
Study on Robust and Fair Evaluation of Large Language Models" (§3.3, Finding 6 and table 4)
count successful completions over 1,000 questions with three attempts each and find far
more of them on public benchmarks (AGIEval, C-Eval) than on their private bank. The paper
does not describe the matching rule; this module follows the masking-and-completion idea
of Deng et al. (2024, "Investigating data contamination in modern benchmarks for large
language models", NAACL) and the exact n-gram continuation of Xu et al. (2024,
"Benchmarking benchmark leakage in large language models"), relaxed to a near-exact match
so that a stray character or a normalisation difference does not hide a replay:

- :func:`mask_question` hides the end of an item (:class:`MaskedText`);
- :func:`replay_prompt` is the instruction sent with the visible prefix;
- :func:`completion_match` compares the model's continuation with the hidden end
  (:class:`ReplayMatch`), :func:`levenshtein` and :func:`replay_units` being its parts;
- :func:`replay_rate` is the share of near-exact completions with a Clopper-Pearson
  interval (:class:`ReplayRate`).

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from judge.contamination.arguments import (
    check_count,
    check_fraction,
    check_text,
    check_unit_interval,
)

__all__ = [
    "MAX_MATCH_UNITS",
    "MaskedText",
    "ReplayMatch",
    "ReplayRate",
    "Unit",
    "completion_match",
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


@dataclass(frozen=True, slots=True)
class MaskedText:
    """An item cut into a visible prefix and a hidden end (LLMEval-Fair §3.3).

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
    """Hide the end of an item for a fill-in replay test (LLMEval-Fair §3.3, Finding 6).

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
    check_text(text, "text")
    fraction = check_fraction(hidden_fraction, "hidden_fraction")
    floor = check_count(min_hidden, "min_hidden", 1)
    keep = check_count(min_prefix, "min_prefix", 1)
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
    """The instruction of a fill-in replay test (LLMEval-Fair §3.3, Finding 6).

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
    check_text(prefix, "prefix")
    check_text(language, "language")
    if not prefix.strip():
        raise ValueError("prefix is blank: a replay prompt needs a visible beginning")
    key = "zh" if language.strip().lower().startswith("zh") else "en"
    return _PROMPTS[key].format(prefix=prefix)


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
    check_text(text, "text")
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
    """Score a fill-in replay completion against the hidden end (LLMEval-Fair §3.3).

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
    check_text(completion, "completion")
    check_text(hidden, "hidden")
    cutoff = check_unit_interval(threshold, "threshold")
    if prefix is not None:
        check_text(prefix, "prefix")
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
    """Replay rate with a Clopper-Pearson interval (LLMEval-Fair §3.3, table 4).

    Table 4 of LLMEval-Fair reports counts of successful completions; a rate with an exact
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
    level = check_fraction(confidence_level, "confidence_level")
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
        total = check_count(n, "n", 1)
        k = check_count(near_exact, "near_exact", 0)
        if k > total:
            raise ValueError(f"near_exact ({k}) cannot exceed n ({total})")
    alpha = 1.0 - level
    from scipy.stats import beta  # here, not at import: scipy.stats costs every CLI start 1 s

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
