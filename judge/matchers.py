"""Deterministic matchers for objective answers (papers/003 §3.2 tier 1; DESIGN "Scoring").

Every matcher takes the model's final answer (reasoning trace already removed, see
:mod:`judge.traces`) and the item's reference answer, and returns a :class:`Match`:

* ``correct=True`` / ``False``: decided objectively, with ``method`` naming the matcher and
  ``detail`` saying what was compared;
* ``correct=None``: the matcher cannot decide (no recognisable verdict, letter or number,
  an expression it will not parse, a reference of the wrong shape). The caller then uses
  the similarity filter or the LLM judge. A matcher never guesses: when in doubt it says
  None.

All functions are pure and total on ``str`` input (they do not raise on odd text).

Security: answers are untrusted model output. :func:`match_symbolic` never hands text to
``sympify``/``parse_expr`` (both call ``eval``); it converts a little LaTeX, checks the
result against a character whitelist, tokenises it and builds the SymPy expression with
its own recursive-descent parser that knows only numbers, single-letter variables,
``pi``/``e``, ``sin cos tan log ln exp sqrt`` and ``+ - * / ^``. Input length, nesting
depth, exponent sizes and exponential towers are bounded, and ``simplify`` runs only on
small expressions, so a hostile answer such as ``9^9^9`` is refused in microseconds.

The 0-3 rubric (papers/004 fig. 11) maps an objective decision through
:class:`ScorePolicy`: correct -> 3, wrong -> 0 by default.
"""

from __future__ import annotations

import itertools
import math
import random
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeAlias

import sympy

__all__ = [
    "UNITS",
    "Match",
    "ScorePolicy",
    "looks_like_formula",
    "match_choice",
    "match_exact",
    "match_number",
    "match_symbolic",
    "match_true_false",
    "normalise_answer",
    "objective_match",
]


@dataclass(frozen=True, slots=True)
class Match:
    """The outcome of an objective matcher.

    ``correct`` is True (the answer matches the reference), False (it does not) or None
    (the matcher cannot decide objectively). ``method`` names the matcher that decided
    (``true_false``, ``choice``, ``number``, ``symbolic``, ``exact``) and ``detail`` is a
    short human-readable explanation for audit logs.
    """

    correct: bool | None
    method: str
    detail: str


@dataclass(frozen=True, slots=True)
class ScorePolicy:
    """Maps an objective :class:`Match` onto the 0-3 rubric (papers/004 fig. 11).

    The rubric's 3 is "correct answer with a reasonable explanation" and 0 is "wrong answer
    with a wrong explanation"; an objective item has no explanation to weigh, so a correct
    answer scores ``correct`` (3) and a wrong one ``wrong`` (0). ``correct`` must exceed
    ``wrong`` and both must be non-negative.
    """

    correct: int = 3
    wrong: int = 0

    def __post_init__(self) -> None:
        if self.wrong < 0:
            raise ValueError(f"wrong must be >= 0, got {self.wrong}")
        if self.correct <= self.wrong:
            raise ValueError(f"correct must be > wrong, got correct={self.correct}")

    def score(self, match: Match) -> int | None:
        """The rubric score of ``match``; None when the match is undecided."""
        if match.correct is None:
            return None
        return self.correct if match.correct else self.wrong


# --------------------------------------------------------------------------- #
# Shared text helpers
# --------------------------------------------------------------------------- #

_MINUS_SIGNS = str.maketrans(
    {"\u2212": "-", "\u2013": "-", "\u2010": "-", "\u2011": "-", "\u2044": "/"}
)

# A line that starts with an answer label: "Answer:", "**Final answer**:", "答案：", "答：".
_STRONG_LABEL = re.compile(
    r"^[ \t>*#_\-]*(?:final\s+answer|answer|verdict|conclusion|最终答案|正确答案|答案|结论|答)"
    r"[ \t]*(?:\*+[ \t]*)?(?::|是|为)[ \t]*\**",
    re.IGNORECASE | re.MULTILINE,
)
# An inline answer phrase: "the answer is", "答案为".
_WEAK_LABEL = re.compile(
    r"\b(?:final\s+answer|answer)\b\s*(?:\*+\s*)?"
    r"(?:(?:is|would\s+be|should\s+be|will\s+be)\b(?:\s*:)?|[:=])"
    r"|(?:最终答案|正确答案|答案)\s*(?:(?:应该是|应为|应是|是|为)\s*)?:?"
    r"|(?<![回解问])答\s*:",
    re.IGNORECASE,
)


def _prepare(text: str) -> str:
    """NFKC (full-width to ASCII, ``：`` to ``:``, ``℃`` to ``°C``) and plain minus signs."""
    return unicodedata.normalize("NFKC", text).translate(_MINUS_SIGNS)


def _rest_of_line(text: str, start: int) -> str:
    """The text from ``start`` to the end of its line, or the next non-empty line."""
    rest = text[start:]
    first, _, after = rest.partition("\n")
    if first.strip(" \t*:"):
        return first
    for line in after.split("\n"):
        if line.strip():
            return line
    return ""


def _answer_line(text: str) -> str | None:
    """The content of the last answer label line (strong labels first), if any."""
    strong = list(_STRONG_LABEL.finditer(text))
    if strong:
        return _rest_of_line(text, strong[-1].end())
    weak = list(_WEAK_LABEL.finditer(text))
    if weak:
        return _rest_of_line(text, weak[-1].end())
    return None


_MAX_BRACE_GROUP = 2000


def _brace_group(text: str, start: int) -> tuple[str, int] | None:
    """``(content, index after '}')`` of the brace group opening at ``text[start]``.

    None when there is no group there or it does not close within 2,000 characters."""
    if start >= len(text) or text[start] != "{":
        return None
    depth = 0
    for index in range(start, min(len(text), start + _MAX_BRACE_GROUP)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : index], index + 1
    return None


_BOXED = re.compile(r"\\(?:boxed|fbox)\s*(?=\{)")
_MAX_BOXED = 20  # only the last few \boxed are tried


def _last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}``, or None."""
    for found in reversed(list(_BOXED.finditer(text))[-_MAX_BOXED:]):
        group = _brace_group(text, found.end())
        if group is not None:
            return group[0]
    return None


# --------------------------------------------------------------------------- #
# Exact match
# --------------------------------------------------------------------------- #

_LEADING_LABEL = re.compile(
    r"^\s*(?:(?:the\s+)?(?:final\s+|correct\s+)?answer\s*(?:is|:)|最终答案|正确答案|答案|答)"
    r"\s*(?:(?:是|为|:)\s*)?(?::\s*)?",
    re.IGNORECASE,
)
_KEEP_PUNCTUATION = frozenset("-/%()[]{}")


def normalise_answer(text: str) -> str:
    """Normalise ``text`` for exact comparison.

    NFKC, casefold, a leading answer label removed (``Answer:``, ``The answer is``,
    ``答案：``, ``答：``), a wrapping ``\\boxed{}`` and ``$`` removed, then every whitespace
    character and every Unicode punctuation character (ASCII and Chinese) dropped, except
    ``- / % ( ) [ ] { }`` and a ``.`` between two digits, which can change meaning.
    """
    prepared = _prepare(text).casefold().strip()
    prepared = _LEADING_LABEL.sub("", prepared, count=1)
    boxed = _last_boxed(prepared)
    if boxed is not None and prepared.startswith("\\boxed") and prepared.endswith("}"):
        prepared = boxed
    prepared = prepared.replace("$", "")
    kept: list[str] = []
    for index, char in enumerate(prepared):
        if char.isspace():
            continue
        if unicodedata.category(char).startswith("P") and char not in _KEEP_PUNCTUATION:
            decimal_point = (
                char == "."
                and 0 < index < len(prepared) - 1
                and prepared[index - 1].isdigit()
                and prepared[index + 1].isdigit()
            )
            if not decimal_point:
                continue
        kept.append(char)
    return "".join(kept)


def match_exact(answer: str, reference: str) -> Match:
    """Normalised exact match (see :func:`normalise_answer`).

    True when both normalise to the same non-empty string, False otherwise; None when the
    reference normalises to nothing (nothing to compare against).
    """
    ref = normalise_answer(reference)
    if not ref:
        return Match(None, "exact", "reference is empty after normalisation")
    got = normalise_answer(answer)
    if got == ref:
        return Match(True, "exact", f"normalised answer equals reference {ref!r}")
    return Match(False, "exact", f"normalised answer {got[:60]!r} differs from {ref[:60]!r}")


# --------------------------------------------------------------------------- #
# True / false
# --------------------------------------------------------------------------- #

_TF_PATTERN = re.compile(
    r"""
      (?P<en_true>\b(?:true|correct|right)\b)
    | (?P<en_false>\b(?:false|incorrect|wrong)\b)
    | (?P<zh_true>没有错|没错|无误|正确|√|✓|✔)
    | (?P<zh_false>错误|×|✗|✘)
    | (?P<zh_dui>(?<![相绝针面反核配应比校])对(?=的|了|啊|呀|$|[\s.,;:!?)、]))
    | (?P<zh_cuo>错(?=的|了|啊|呀|$|[\s.,;:!?)、]))
    """,
    re.IGNORECASE | re.VERBOSE,
)
# Words after which "correct"/"right"/"正确"/"错误" describe something else.
_NOT_A_VERDICT_AFTER = re.compile(
    r"\s*(?:answers?|options?|choices?|values?|ones?|results?|expressions?|formulas?|"
    r"numbers?|forms?|ways?|methods?|approach|words?|letters?|versions?|units?|"
    r"triangles?|angles?|sides?|hand|now|away|here|there|after|before)\b",
    re.IGNORECASE,
)
_ZH_NOT_A_VERDICT_AFTER = re.compile(r"(?:答案|选项|的是|的选项|的答案|的有|的说法是|的一项)")
_EN_NEGATION = re.compile(
    r"(?:\bnot|n't|\bcannot|\bnever|\bhardly)\s+(?:(?:entirely|quite|completely|fully|totally|"
    r"necessarily|exactly|really|very|be)\s+)?$",
    re.IGNORECASE,
)
_ZH_NEGATION = re.compile(r"(?:不|非|没有?|无)(?:太|完全|是|很|是很|一定)?$")
_CONDITIONAL = re.compile(r"\b(?:whether|if)\b|是否|如果|假如|若", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[;:!?\n。；：！？]|\.(?!\d)")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?。！？\n])")
_LOOK_AROUND = 80  # characters around a verdict examined for negations, conditionals
_AMBIGUOUS_JOIN = re.compile(r"^\s*(?:or|/|\||and|,|、|或者?|还是|与|和|或是)\s*$", re.IGNORECASE)
_LEADING_YES_NO = re.compile(r"^[\W_]*(?P<word>yes|no|是|否)(?=$|[\W_]|的)", re.IGNORECASE)
_LONE_TF = re.compile(r"^[\W_]*(?P<word>t|f)[\W_]*$", re.IGNORECASE)
_QUOTED = re.compile(
    r"\"([^\"\n]{1,200})\"|“([^”\n]{1,200})”|「([^」\n]{1,200})」|『([^』\n]{1,200})』"
)
_VERDICT_WORDS = frozenset(
    [
        "true",
        "false",
        "correct",
        "incorrect",
        "right",
        "wrong",
        "yes",
        "no",
        "t",
        "f",
        "正确",
        "错误",
        "对",
        "错",
        "是",
        "否",
        "√",
        "×",
        "✓",
        "✗",
    ]
)


def _blank_quotations(text: str) -> str:
    """Blank out quoted passages (an echoed option text) unless they are a bare verdict."""

    def blank(found: re.Match[str]) -> str:
        content = next(group for group in found.groups() if group is not None)
        if content.strip(" .,;:!。，！").casefold() in _VERDICT_WORDS:
            return found.group(0)
        return " " * len(found.group(0))

    return _QUOTED.sub(blank, text)


@dataclass(frozen=True, slots=True)
class _Verdict:
    value: bool
    start: int
    end: int
    text: str


def _tf_verdicts(region: str) -> Iterator[_Verdict]:
    """The true/false verdicts in ``region`` in order, negations applied (lazily)."""
    lone = _LONE_TF.match(region)
    if lone is not None:
        word = lone.group("word").casefold()
        yield _Verdict(word == "t", lone.start("word"), lone.end("word"), word)
        return
    leading = _LEADING_YES_NO.match(region)
    if leading is not None:
        word = leading.group("word").casefold()
        yield _Verdict(word in ("yes", "是"), leading.start("word"), leading.end("word"), word)
    for found in _TF_PATTERN.finditer(region):
        if leading is not None and found.start() < leading.end("word"):
            continue
        kind = found.lastgroup or ""
        token = found.group(0)
        after = region[found.end() : found.end() + _LOOK_AROUND]
        before = region[max(0, found.start() - _LOOK_AROUND) : found.start()]
        if kind.startswith("en"):
            if _NOT_A_VERDICT_AFTER.match(after):
                continue
            negated = _EN_NEGATION.search(before) is not None
        else:
            if kind in ("zh_true", "zh_false") and _ZH_NOT_A_VERDICT_AFTER.match(after):
                continue
            negated = _ZH_NEGATION.search(before) is not None
        sentence_start = max((m.end() for m in _SENTENCE_END.finditer(before)), default=0)
        if _CONDITIONAL.search(before[sentence_start:]):
            continue
        value = kind in ("en_true", "zh_true", "zh_dui")
        shown = f"{token} (negated)" if negated else token
        yield _Verdict(value != negated, found.start(), found.end(), shown)


def _without_questions(text: str) -> str:
    """``text`` with every sentence that ends in a question mark blanked out."""
    sentences = _SENTENCE_SPLIT.split(text)
    return "".join(
        " " * len(sentence) if sentence.rstrip().endswith(("?", "？")) else sentence
        for sentence in sentences
    )


def _tf_decision(text: str) -> tuple[bool | None, str]:
    """The verdict stated in ``text``: (value or None, explanation)."""
    prepared = _prepare(text)
    strong = list(_STRONG_LABEL.finditer(prepared))
    if strong:
        region = prepared[strong[-1].end() :]
        where = "answer line"
    else:
        region = prepared
        where = "text"
    region = _without_questions(_blank_quotations(region))
    verdicts = list(itertools.islice(_tf_verdicts(region), 2))
    if not verdicts:
        return None, f"no true/false verdict in the {where}"
    first = verdicts[0]
    if len(verdicts) > 1:
        second = verdicts[1]
        if second.value != first.value and _AMBIGUOUS_JOIN.match(region[first.end : second.start]):
            return None, f"ambiguous verdict {region[first.start : second.end]!r}"
    return first.value, f"{first.text!r} in the {where}"


def match_true_false(answer: str, reference: str) -> Match:
    """Compare a true/false verdict with the reference verdict.

    Recognised forms: English ``true/false``, ``correct/incorrect``, ``right/wrong``, a
    leading ``yes``/``no``, a lone ``T``/``F``; Chinese ``正确/错误``, ``对/错``, a leading
    ``是``/``否``, ``没错``, and the marks ``√ ✓ ✔`` / ``× ✗ ✘``. Negations flip a verdict
    (``not correct``, ``isn't right``, ``不正确``, ``不对``). The verdict is the first one in
    the last labelled answer line (``Answer:``, ``答案：``) or, without such a line, the first
    one in the text; verdicts inside questions (sentences ending in ``?``), ``whether``/
    ``if``/``是否`` clauses and phrases such as "the correct answer is" are skipped. A first
    verdict immediately paired with its opposite ("true or false", "√/×") is ambiguous.

    Returns None when the reference is not a verdict, or the answer has none or an
    ambiguous one.
    """
    expected, _ = _tf_decision(reference)
    if expected is None:
        return Match(None, "true_false", f"reference {reference[:40]!r} is not true/false")
    got, how = _tf_decision(answer)
    if got is None:
        return Match(None, "true_false", how)
    verdict = "true" if got else "false"
    return Match(got == expected, "true_false", f"answer says {verdict} ({how})")


# --------------------------------------------------------------------------- #
# Multiple choice
# --------------------------------------------------------------------------- #

_DEFAULT_LETTERS = "ABCDEFGHIJ"
_GROUP = r"(?P<group>[A-Z](?:(?:\s*(?:,|、|和|与|及|&|/|\band\b)\s*)?[A-Z])*)(?![A-Za-z])"
_GROUP_LOWER = r"(?P<lower>[a-z])(?=\s*(?:$|[.,;:!?)\]。，；]))"
_CHOICE_LABEL = re.compile(
    r"(?:"
    r"(?i:\b(?:final\s+|correct\s+)?answer(?:\s+(?:choice|option))?\s*(?:\*+\s*)?"
    r"(?:is|would\s+be|should\s+be|will\s+be|:|=)(?:\s*:)?)"
    r"|(?i:\bcorrect\s+(?:option|choice)\s*(?:is|:)(?:\s*:)?)"
    r"|(?:最终答案|正确答案|正确选项|答案)(?:\s*(?:应该是|应为|应是|是|为|选))?(?:\s*:)?"
    r"|(?:故|所以|因此|应|应当|应该|只能|则|即|本题)?选(?:择)?(?![项])(?:\s*:)?"
    r"|(?<![回解问])答\s*:"
    r")\s*(?:\*+\s*)?(?:(?i:option|choice|选项)\s*)?(?:[(\[]\s*)?"
    r"(?:" + _GROUP + "|" + _GROUP_LOWER + ")"
)
_CHOICE_MARKER = re.compile(
    r"\((?P<paren>[A-Z])\)"
    r"|^[ \t*#>]*(?P<line>[A-Z])[ \t]*[.):、](?![0-9])"
    r"|(?P<xiang>[A-Z])\s*(?:项|选项)"
    r"|(?i:\b(?:option|choice))\s+(?P<option>[A-Z])\b|选项\s*(?P<zh_option>[A-Z])(?![A-Za-z])",
    re.MULTILINE,
)
_WHOLE_GROUP = re.compile(
    r"^[\s*(\[]*(?P<group>[A-Z](?:\s*(?:(?:,|、|和|与|及|&|/|\band\b)\s*)?[A-Z])*)"
    r"[\s*)\].。]*$"
)
_NUMBERED_REFERENCE = re.compile(
    r"^\s*\(?\d+\)?\s*[.、):]\s*[A-Z]+(?:\s*[;,]\s*\(?\d+\)?\s*[.、):]\s*[A-Z]+)*\s*$"
)
_NUMBERED_ENTRY = re.compile(r"\(?(?P<number>\d+)\)?\s*[.、):]\s*(?P<letters>[A-Z]+)")
_NUMBERED_ANSWER = re.compile(
    r"(?<![\d.])(?:\((?P<paren>\d{1,2})\)(?:\s*[.、:\-])?|(?P<number>\d{1,2})\s*[.、):\-])"
    r"\s*(?:[(\[]\s*)?(?P<letters>[A-Z]{1,4})[)\]]?(?![A-Za-z])"
)
_PLAIN_LETTERS = re.compile(r"^\s*[A-Z](?:\s*(?:[,、/]\s*)?[A-Z])*\s*$")
_FALLBACK_LETTER = re.compile(r"(?<![A-Za-z'’])(?P<letter>[A-Z])(?![A-Za-z'’])")


def _letters_of(group: str) -> str:
    """The capital letters of a group like ``"A, C"`` or ``"A和C"`` in order."""
    return "".join(char for char in group.replace("and", " ") if "A" <= char <= "Z")


def _universe(options: Sequence[str] | None, reference_letters: str) -> str:
    if options:
        return "".join(chr(ord("A") + index) for index in range(min(len(options), 26)))
    top = max([*_DEFAULT_LETTERS, *reference_letters])
    return "".join(chr(code) for code in range(ord("A"), ord(top) + 1))


def _valid_group(letters: str, universe: str, repeats: bool = False) -> bool:
    distinct = repeats or len(set(letters)) == len(letters)
    return bool(letters) and distinct and set(letters) <= set(universe)


def _labelled_groups(text: str, universe: str, repeats: bool) -> list[str]:
    groups: list[str] = []
    for found in _CHOICE_LABEL.finditer(text):
        if found.group("group") is not None:
            letters = _letters_of(found.group("group"))
        else:
            letters = found.group("lower").upper()
        if _valid_group(letters, universe, repeats):
            groups.append(letters)
    return groups


def _choice_letters(text: str, universe: str, repeats: bool = False) -> tuple[str | None, str]:
    """The letters the answer picks, in order, or None with a reason.

    ``repeats`` allows a letter more than once (sub-answers in order, ``"ABAC"``)."""
    boxed = _last_boxed(text)
    if boxed is not None:
        inner = re.sub(r"\\(?:text|mathrm|textbf)\s*\{([^{}]*)\}", r"\1", boxed)
        whole = _WHOLE_GROUP.match(inner.upper())
        letters = "" if whole is None else _letters_of(whole.group("group"))
        if _valid_group(letters, universe, repeats):
            return letters, "boxed"
    whole = _WHOLE_GROUP.match(text)
    if whole is not None:
        letters = _letters_of(whole.group("group"))
        if _valid_group(letters, universe, repeats):
            return letters, "bare letters"
    labelled = _labelled_groups(text, universe, repeats)
    if labelled:
        distinct = {group if repeats else "".join(sorted(group)) for group in labelled}
        if len(distinct) > 1:
            return None, f"names different answers {sorted(set(labelled))}"
        return labelled[-1], "labelled"
    markers: list[str] = []
    for found in _CHOICE_MARKER.finditer(text):
        letter = next(group for group in found.groups() if group is not None)
        if letter in universe:
            markers.append(letter)
    if markers:
        if len(set(markers)) > 1:
            return None, f"mentions several options {sorted(set(markers))} without an answer"
        return markers[0], "marked option"
    if len(text.strip()) <= 40:
        candidates = []
        for found in _FALLBACK_LETTER.finditer(text):
            letter = found.group("letter")
            tail = text[found.end() :]
            if letter in ("A", "I") and re.match(r"\s+[a-z]", tail):
                continue  # the article "A" or the pronoun "I"
            if letter in universe:
                candidates.append(letter)
        if len(set(candidates)) == 1:
            return candidates[0], "lone letter"
        if candidates:
            return None, f"several letters {sorted(set(candidates))}"
    return None, "no option letter"


def _option_by_text(text: str, options: Sequence[str]) -> tuple[str | None, str]:
    """The letter of the option whose text the answer quotes, if exactly one."""
    answer = normalise_answer(text)
    if not answer:
        return None, "empty answer"
    normalised = [normalise_answer(option) for option in options]
    for index, option in enumerate(normalised):
        if option and option == answer:
            return chr(ord("A") + index), "answer is an option's text"
    contained = [index for index, option in enumerate(normalised) if option and option in answer]
    contained = [
        index
        for index in contained
        if not any(other != index and normalised[index] in normalised[other] for other in contained)
    ]
    if len(contained) == 1:
        return chr(ord("A") + contained[0]), "answer quotes an option's text"
    if contained:
        return None, "answer quotes several options"
    return None, "no option letter or option text"


def _match_numbered(text: str, entries: list[tuple[int, str]], universe: str) -> Match:
    """Compare an answer with a numbered reference like ``1. A; 2. C``."""
    found: dict[int, str] = {}
    for entry in _NUMBERED_ANSWER.finditer(text):
        letters = entry.group("letters")
        if _valid_group(letters, universe):
            found[int(entry.group("paren") or entry.group("number"))] = letters
    numbers = [number for number, _ in entries]
    if all(number in found for number in numbers):
        wrong = [number for number, letters in entries if set(found[number]) != set(letters)]
        if wrong:
            return Match(False, "choice", f"sub-answers {wrong} differ from the reference")
        return Match(True, "choice", f"all {len(entries)} sub-answers match")
    if all(len(letters) == 1 for _, letters in entries):
        letters_seen, how = _choice_letters(text, universe, repeats=True)
        if letters_seen is not None and len(letters_seen) == len(entries):
            expected = "".join(letters for _, letters in entries)
            ok = letters_seen == expected
            return Match(ok, "choice", f"answer {letters_seen} ({how}) vs {expected} in order")
    return Match(None, "choice", "could not find every numbered sub-answer")


def match_choice(answer: str, reference: str, options: Sequence[str] | None = None) -> Match:
    """Compare the option letter(s) an answer picks with the reference letter(s).

    The reference is a letter (``"C"``), a multi-select group (``"AC"``, ``"A, C"``), a
    numbered list of sub-answers (``"1. A; 2. C; 3. D"``), or (with ``options``) an option's
    exact text. The answer's letters are read, in priority order, from the last
    ``\\boxed{}``, a bare letter group (``"C"``, ``"(C)"``, ``"CA"``), labelled phrases
    (``"answer is C"``, ``"Answer: (C)"``, ``"答案：C"``, ``"选C"``, ``"故选：AC"``), option
    markers (``"(C)"``, a line starting ``"C."``, ``"C项"``, ``"option C"``) and, in a short
    answer, a lone capital letter (``"I think it's B"``). Multi-select compares as a set
    (``"AC"`` == ``"CA"``, ``"C"`` != ``"AC"``); a numbered reference compares each
    sub-answer (or, for single letters, a group in order). Without any letter, an answer
    that equals or quotes exactly one option's text maps to that option.

    Returns None when the answer names two different letter sets as the answer, mentions
    several options without saying which is the answer, or names no option at all.
    """
    ref = _prepare(reference).strip()
    text = _prepare(answer)
    if _NUMBERED_REFERENCE.match(ref):
        entries = [
            (int(entry.group("number")), entry.group("letters"))
            for entry in _NUMBERED_ENTRY.finditer(ref)
        ]
        universe = _universe(options, "".join(letters for _, letters in entries))
        return _match_numbered(text, entries, universe)
    expected: str | None = None
    if _PLAIN_LETTERS.match(ref):
        expected = _letters_of(ref)
    elif options:
        normalised = normalise_answer(ref)
        for index, option in enumerate(options):
            if normalised and normalise_answer(option) == normalised:
                expected = chr(ord("A") + index)
                break
    if not expected:
        return Match(None, "choice", f"reference {reference[:40]!r} is not an option letter")
    universe = _universe(options, expected)
    letters, how = _choice_letters(text, universe)
    if letters is None and options and how == "no option letter":
        letters, how = _option_by_text(text, options)
    if letters is None:
        return Match(None, "choice", how)
    ok = set(letters) == set(expected)
    shown = "".join(sorted(set(letters)))
    return Match(ok, "choice", f"answer picks {shown} ({how}); reference {expected}")


# --------------------------------------------------------------------------- #
# Numbers with units
# --------------------------------------------------------------------------- #

_LENGTH, _TIME, _MASS = "length", "time", "mass"
UNITS: dict[str, tuple[str, float, float]] = {
    # unit: (dimension, factor to the SI unit, offset added after scaling)
    "m": (_LENGTH, 1.0, 0.0), "cm": (_LENGTH, 1e-2, 0.0), "mm": (_LENGTH, 1e-3, 0.0),
    "dm": (_LENGTH, 0.1, 0.0), "km": (_LENGTH, 1e3, 0.0), "μm": (_LENGTH, 1e-6, 0.0),
    "nm": (_LENGTH, 1e-9, 0.0), "米": (_LENGTH, 1.0, 0.0), "厘米": (_LENGTH, 1e-2, 0.0),
    "毫米": (_LENGTH, 1e-3, 0.0), "分米": (_LENGTH, 0.1, 0.0), "千米": (_LENGTH, 1e3, 0.0),
    "公里": (_LENGTH, 1e3, 0.0), "微米": (_LENGTH, 1e-6, 0.0), "纳米": (_LENGTH, 1e-9, 0.0),
    "s": (_TIME, 1.0, 0.0), "ms": (_TIME, 1e-3, 0.0), "μs": (_TIME, 1e-6, 0.0),
    "min": (_TIME, 60.0, 0.0), "h": (_TIME, 3600.0, 0.0), "hr": (_TIME, 3600.0, 0.0),
    "秒": (_TIME, 1.0, 0.0), "毫秒": (_TIME, 1e-3, 0.0), "分钟": (_TIME, 60.0, 0.0),
    "小时": (_TIME, 3600.0, 0.0),
    "kg": (_MASS, 1.0, 0.0), "g": (_MASS, 1e-3, 0.0), "mg": (_MASS, 1e-6, 0.0),
    "千克": (_MASS, 1.0, 0.0), "公斤": (_MASS, 1.0, 0.0), "克": (_MASS, 1e-3, 0.0),
    "毫克": (_MASS, 1e-6, 0.0), "吨": (_MASS, 1e3, 0.0),
    "N": ("force", 1.0, 0.0), "kN": ("force", 1e3, 0.0), "牛": ("force", 1.0, 0.0),
    "牛顿": ("force", 1.0, 0.0), "千牛": ("force", 1e3, 0.0),
    "J": ("energy", 1.0, 0.0), "kJ": ("energy", 1e3, 0.0), "MJ": ("energy", 1e6, 0.0),
    "kWh": ("energy", 3.6e6, 0.0), "kW·h": ("energy", 3.6e6, 0.0),
    "eV": ("energy", 1.602176634e-19, 0.0), "焦": ("energy", 1.0, 0.0),
    "焦耳": ("energy", 1.0, 0.0), "千焦": ("energy", 1e3, 0.0),
    "W": ("power", 1.0, 0.0), "kW": ("power", 1e3, 0.0), "MW": ("power", 1e6, 0.0),
    "瓦": ("power", 1.0, 0.0), "瓦特": ("power", 1.0, 0.0), "千瓦": ("power", 1e3, 0.0),
    "V": ("voltage", 1.0, 0.0), "kV": ("voltage", 1e3, 0.0), "mV": ("voltage", 1e-3, 0.0),
    "伏": ("voltage", 1.0, 0.0), "伏特": ("voltage", 1.0, 0.0), "千伏": ("voltage", 1e3, 0.0),
    "A": ("current", 1.0, 0.0), "mA": ("current", 1e-3, 0.0), "μA": ("current", 1e-6, 0.0),
    "安": ("current", 1.0, 0.0), "安培": ("current", 1.0, 0.0), "毫安": ("current", 1e-3, 0.0),
    "Ω": ("resistance", 1.0, 0.0), "kΩ": ("resistance", 1e3, 0.0),
    "MΩ": ("resistance", 1e6, 0.0), "ohm": ("resistance", 1.0, 0.0),
    "ohms": ("resistance", 1.0, 0.0), "欧": ("resistance", 1.0, 0.0),
    "欧姆": ("resistance", 1.0, 0.0), "千欧": ("resistance", 1e3, 0.0),
    "mol": ("amount", 1.0, 0.0), "mmol": ("amount", 1e-3, 0.0), "摩": ("amount", 1.0, 0.0),
    "摩尔": ("amount", 1.0, 0.0),
    "L": ("volume", 1.0, 0.0), "mL": ("volume", 1e-3, 0.0), "ml": ("volume", 1e-3, 0.0),
    "m3": ("volume", 1e3, 0.0), "dm3": ("volume", 1.0, 0.0), "cm3": ("volume", 1e-3, 0.0),
    "升": ("volume", 1.0, 0.0), "毫升": ("volume", 1e-3, 0.0),
    "m/s": ("velocity", 1.0, 0.0), "m·s-1": ("velocity", 1.0, 0.0),
    "km/h": ("velocity", 1 / 3.6, 0.0), "km/s": ("velocity", 1e3, 0.0),
    "cm/s": ("velocity", 1e-2, 0.0), "米/秒": ("velocity", 1.0, 0.0),
    "米每秒": ("velocity", 1.0, 0.0), "千米/时": ("velocity", 1 / 3.6, 0.0),
    "千米/小时": ("velocity", 1 / 3.6, 0.0), "千米每小时": ("velocity", 1 / 3.6, 0.0),
    "m/s2": ("acceleration", 1.0, 0.0), "m·s-2": ("acceleration", 1.0, 0.0),
    "cm/s2": ("acceleration", 1e-2, 0.0), "米/秒2": ("acceleration", 1.0, 0.0),
    "°C": ("temperature", 1.0, 273.15), "摄氏度": ("temperature", 1.0, 273.15),
    "K": ("temperature", 1.0, 0.0), "开尔文": ("temperature", 1.0, 0.0),
    "°": ("angle", math.pi / 180, 0.0), "rad": ("angle", 1.0, 0.0),
    "弧度": ("angle", 1.0, 0.0),
    "%": ("percent", 1.0, 0.0), "percent": ("percent", 1.0, 0.0),
    "元": ("currency", 1.0, 0.0), "万元": ("currency", 1e4, 0.0),
    "亿元": ("currency", 1e8, 0.0),
    "Pa": ("pressure", 1.0, 0.0), "kPa": ("pressure", 1e3, 0.0),
    "MPa": ("pressure", 1e6, 0.0), "帕": ("pressure", 1.0, 0.0),
    "千帕": ("pressure", 1e3, 0.0),
    "Hz": ("frequency", 1.0, 0.0), "kHz": ("frequency", 1e3, 0.0),
    "MHz": ("frequency", 1e6, 0.0), "赫兹": ("frequency", 1.0, 0.0),
    "kg/m3": ("density", 1.0, 0.0), "g/cm3": ("density", 1e3, 0.0),
    "g/mL": ("density", 1e3, 0.0),
    "mol/L": ("concentration", 1.0, 0.0), "mmol/L": ("concentration", 1e-3, 0.0),
}  # fmt: skip
"""Units :func:`match_number` knows: ``unit -> (dimension, factor, offset)``.

A value ``v`` in ``unit`` is ``v * factor + offset`` in the dimension's base unit (only the
temperatures have an offset). Units are matched case-sensitively right after a number
(``mA`` is not ``MA``); ASCII units must not run on into a letter (``5 min`` is minutes,
``5 so`` has no unit)."""


def _unit_alternative(unit: str) -> str:
    escaped = re.escape(unit)
    return escaped + r"(?![A-Za-z])" if unit[-1].isascii() and unit[-1].isalpha() else escaped


_UNIT_PATTERN = "|".join(_unit_alternative(unit) for unit in sorted(UNITS, key=len, reverse=True))
_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.])"
    r"(?P<sign>[+-])?"
    r"(?:"
    r"(?P<pow10>10\s*\^\s*(?:\{\s*)?(?P<pow10exp>[+-]?\d{1,4})(?:\s*\})?)"
    r"|(?P<body>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)"
    r"(?:\s*/\s*(?P<den>\d+)(?![\d.]))?"
    r"(?:[eE](?P<eexp>[+-]?\d{1,4})"
    r"|\s*[x×*·]\s*10\s*\^\s*(?:\{\s*)?(?P<sciexp>[+-]?\d{1,4})(?:\s*\})?)?"
    r")"
    r"(?:[ \t]{0,2}(?P<unit>" + _UNIT_PATTERN + r"))?"
)
_LATEX_NUMBER_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\\[dt]?frac\s*\{\s*([+-]?[\d.]+)\s*\}\s*\{\s*([\d.]+)\s*\}"), r"\1/\2"),
    (re.compile(r"\\(?:text|mathrm|rm|textrm|operatorname)\s*\{([^{}]*)\}"), r" \1"),
    (re.compile(r"\^\s*(?:\{\s*)?\\circ(?:\s*\})?"), "°"),
    (re.compile(r"\\(?:circ|degree)"), "°"),
    (re.compile(r"\\%"), "%"),
    (re.compile(r"\\times"), "×"),
    (re.compile(r"\\cdot"), "·"),
    (re.compile(r"\\Omega"), "Ω"),
    (re.compile(r"\\mu"), "μ"),
    (re.compile(r"\\[,;:! ]|~"), " "),
    (re.compile(r"\\(?:left|right)(?![A-Za-z])"), ""),
    (re.compile(r"(?<=[A-Za-z])\^\s*(?:\{\s*)?(-?\d)(?:\s*\})?"), r"\1"),
    (re.compile(r"\$"), " "),
)
_EXPRESSION_BEFORE = frozenset("+-/^*×·\\{√")
_EXPRESSION_AFTER = frozenset("^(/*×·!\\{π")
_REFERENCE_PREFIX = re.compile(
    r"^\s*(?:[A-Za-z](?:_?\w{0,3})?\s*=|≈|~|约|大约|about|approximately|approx\.?)\s*",
    re.IGNORECASE,
)
_MAX_NUMBER_TEXT = 120


@dataclass(frozen=True, slots=True)
class _Quantity:
    value: float
    unit: str | None
    text: str


def _number_text(text: str) -> str:
    """``text`` with the LaTeX that numbers and units are written in turned into plain text."""
    prepared = _prepare(text)
    for pattern, replacement in _LATEX_NUMBER_REWRITES:
        prepared = pattern.sub(replacement, prepared)
    return prepared


def _quantity(found: re.Match[str]) -> _Quantity | None:
    """The value of a :data:`_NUMBER` match, or None if it is not a finite number."""
    if len(found.group(0)) > _MAX_NUMBER_TEXT:
        return None
    try:
        if found.group("pow10") is not None:
            value = Fraction(10) ** int(found.group("pow10exp"))
        else:
            value = Fraction(found.group("body").replace(",", ""))
            if found.group("den") is not None:
                denominator = Fraction(found.group("den"))
                if denominator == 0:
                    return None
                value /= denominator
            exponent = found.group("eexp") or found.group("sciexp")
            if exponent is not None:
                value *= Fraction(10) ** int(exponent)
        if found.group("sign") == "-":
            value = -value
        number = float(value)
    except (ValueError, OverflowError, ZeroDivisionError):
        return None
    if not math.isfinite(number):
        return None
    return _Quantity(number, found.group("unit"), found.group(0).strip())


def _in_expression(text: str, found: re.Match[str]) -> bool:
    """True when the number is an operand of a larger expression (``pi/6``, ``2^10``)."""
    before = text[: found.start()].rstrip()
    if before and before[-1] in _EXPRESSION_BEFORE:
        return True
    if before.endswith("(") and re.search(r"[A-Za-z]\s*\($", before):
        return True
    if found.group("unit") is None:
        end = found.end()
        if end < len(text) and (text[end].isascii() and text[end].isalpha()):
            return True
    after = text[found.end() :].lstrip()
    return bool(after) and after[0] in _EXPRESSION_AFTER


def _reference_quantity(reference: str) -> _Quantity | None:
    """The reference as a single number with an optional unit, or None."""
    text = _number_text(reference).strip()
    boxed = _last_boxed(text)
    if boxed is not None:
        text = boxed
    text = _LEADING_LABEL.sub("", text, count=1)
    text = _REFERENCE_PREFIX.sub("", text, count=1).strip().rstrip(".。").strip()
    found = _NUMBER.fullmatch(text)
    if found is None:
        return None
    return _quantity(found)


def _final_quantity(answer: str) -> tuple[_Quantity | None, str]:
    """The answer's final number: last number of the last ``\\boxed{}`` or answer line,
    else of the whole text."""
    text = _number_text(answer)
    regions: list[tuple[str, str]] = []
    boxed = _last_boxed(text)
    if boxed is not None:
        regions.append((boxed, "boxed"))
    else:
        line = _answer_line(text)
        if line is not None:
            regions.append((line, "answer line"))
    regions.append((text, "text"))
    for region, where in regions:
        matches = list(_NUMBER.finditer(region))
        if not matches:
            continue
        last = matches[-1]
        if _in_expression(region, last):
            return None, f"the last number in the {where} is part of an expression"
        quantity = _quantity(last)
        if quantity is None:
            return None, f"{last.group(0)!r} is not a finite number"
        return quantity, where
    return None, "no number in the answer"


def _compare_quantities(
    got: _Quantity, expected: _Quantity, rel_tol: float, abs_tol: float
) -> Match:
    got_value, expected_value = got.value, expected.value
    note = ""
    if got.unit is not None and expected.unit is not None and got.unit != expected.unit:
        got_dim, got_factor, got_offset = UNITS[got.unit]
        exp_dim, exp_factor, exp_offset = UNITS[expected.unit]
        if got_dim != exp_dim:
            return Match(
                False, "number", f"unit {got.unit} ({got_dim}) vs {expected.unit} ({exp_dim})"
            )
        got_value = got_value * got_factor + got_offset
        expected_value = expected_value * exp_factor + exp_offset
        note = f" after converting {got.unit} and {expected.unit}"
    ok = math.isclose(got_value, expected_value, rel_tol=rel_tol, abs_tol=abs_tol)
    relation = "equals" if ok else "differs from"
    return Match(ok, "number", f"{got.text!r} {relation} reference {expected.text!r}{note}")


def match_number(
    answer: str, reference: str, *, rel_tol: float = 1e-4, abs_tol: float = 1e-9
) -> Match:
    """Compare the answer's final number with a numeric reference.

    The reference must be one number with an optional unit (``"3.5 m/s"``, ``"-1/2"``,
    ``"1,234"``, ``"6.02e23"``, ``"3×10^8 m/s"``, ``"50%"``, ``"\\frac{1}{2}"``, an optional
    ``"x ="``/``"约"`` prefix). The answer's number is the last number of the last
    ``\\boxed{}``, else of the last answer line (``Answer:``, ``答案：``, ``the answer is``),
    else of the whole text. Numbers have optional signs, decimals, thousands separators,
    fractions ``a/b``, ``e``-notation and ``× 10^k``; LaTeX ``\\frac{a}{b}`` with numeric
    parts, ``$``, ``\\text{}`` and ``^\\circ`` are understood.

    Units (:data:`UNITS`) are compared only when both sides carry a known unit: same
    dimension -> convert (``1 km`` == ``1000 m``, ``0 °C`` == ``273.15 K``); different
    dimensions -> wrong. A unit on one side only is ignored.

    Percentages: ``%`` is a unit of its own dimension, not a factor of 1/100. So ``50%``
    equals ``50%`` and (unit on one side ignored) ``50``, but ``50%`` and ``0.5`` are NOT
    equal in either direction: the written numbers differ, and reading one as the other
    would be a guess about the question's wording.

    Values are equal when ``math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)``.
    When the final number is an operand of an expression (``sin(pi/6)``, ``\\sqrt{2}/2``)
    and that expression is a closed-form constant the safe parser of
    :func:`match_symbolic` accepts, its numeric value is compared instead.

    Returns None when the reference is not numeric, the answer has no number, or its final
    number belongs to an expression that cannot be evaluated.
    """
    expected = _reference_quantity(reference)
    if expected is None:
        return Match(None, "number", f"reference {reference[:40]!r} is not a number")
    got, where = _final_quantity(answer)
    if got is not None:
        return _compare_quantities(got, expected, rel_tol, abs_tol)
    value = _constant_value(answer)
    if value is None:
        return Match(None, "number", where)
    ok = math.isclose(value, expected.value, rel_tol=rel_tol, abs_tol=abs_tol)
    relation = "equals" if ok else "differs from"
    return Match(ok, "number", f"expression value {value:.12g} {relation} {expected.text!r}")


# --------------------------------------------------------------------------- #
# Symbolic math (safe parser)
# --------------------------------------------------------------------------- #

SympyExpr: TypeAlias = Any
"""A SymPy expression (SymPy is untyped)."""

MAX_EXPRESSION_CHARS = 200
"""Longest expression (after extraction, before LaTeX conversion) the parser accepts."""
_MAX_CONVERTED_CHARS = 400
_MAX_DEPTH = 40
_MAX_SYMBOLIC_EXPONENT = 64
_MAX_RESULT_BITS = 4096
_MAX_EXP_ARGUMENT = 1000
_MAX_TOWER = 2
_MAX_SIMPLIFY_OPS = 40
_MAX_SIMPLIFY_POWER = 8
_NUMERIC_PROBES = 6

_FUNCTIONS: dict[str, Callable[[SympyExpr], SympyExpr]] = {
    "sin": sympy.sin,
    "cos": sympy.cos,
    "tan": sympy.tan,
    "log": sympy.log,
    "ln": sympy.log,
    "exp": sympy.exp,
    "sqrt": sympy.sqrt,
}
_CONSTANTS: dict[str, SympyExpr] = {"pi": sympy.pi, "e": sympy.E}
_NAMES = sorted([*_FUNCTIONS, "pi"], key=len, reverse=True)
_ALLOWED = re.compile(r"[0-9A-Za-z+\-*/^().\s]*")
_TOKEN = re.compile(r"\s*(?:(?P<number>\d+(?:\.\d*)?|\.\d+)|(?P<name>[A-Za-z]+)|(?P<op>[-+*/^()]))")
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_SUPERSCRIPT_RUN = re.compile(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+")
_MATH_SEGMENT = re.compile(
    r"\$\$([^$]{1,400})\$\$|\$([^$]{1,400})\$|\\\((.{1,400}?)\\\)|\\\[(.{1,400}?)\\\]", re.DOTALL
)
_SIMPLE_LHS = re.compile(
    r"^\s*[A-Za-z](?:'{1,2})?(?:\s*\(\s*[A-Za-z](?:\s*,\s*[A-Za-z])*\s*\))?\s*$"
)
_LATEX_SIMPLE: tuple[tuple[str, str], ...] = (
    (r"\left", ""),
    (r"\right", ""),
    (r"\displaystyle", ""),
    (r"\dfrac", r"\frac"),
    (r"\tfrac", r"\frac"),
    (r"\cdot", "*"),
    (r"\times", "*"),
    (r"\div", "/"),
    (r"\,", " "),
    (r"\;", " "),
    (r"\:", " "),
    (r"\!", ""),
    (r"\ ", " "),
    (r"\quad", " "),
)
_LATEX_NAMES = re.compile(r"\\(sin|cos|tan|log|ln|exp|pi)(?![A-Za-z])")
_LATEX_WRAPPERS = re.compile(r"\\(?:text|mathrm|rm|operatorname|mathit)\s*(?=\{)")


class _Refused(Exception):
    """The expression is outside what the safe parser accepts."""


_SYMPY_ERRORS: tuple[type[Exception], ...] = (
    ArithmeticError,  # ZeroDivisionError, OverflowError, SymPy's PrecisionExhausted
    TypeError,
    ValueError,
    AttributeError,
    NotImplementedError,
    RecursionError,
)
"""What SymPy may raise on an odd but whitelisted expression; treated as "undecided"."""


def _convert_latex(text: str) -> str:
    """Rewrite the LaTeX subset into plain infix; raise :class:`_Refused` on anything else."""
    for old, new in _LATEX_SIMPLE:
        text = text.replace(old, new)
    text = _LATEX_NAMES.sub(r" \1 ", text)
    for _ in range(_MAX_DEPTH):
        changed = False
        found = _LATEX_WRAPPERS.search(text)
        if found is not None:
            group = _brace_group(text, found.end())
            if group is None:
                raise _Refused("unbalanced braces")
            text = text[: found.start()] + group[0] + text[group[1] :]
            changed = True
        index = text.find(r"\frac")
        if index >= 0:
            first = _brace_group(text, _skip_spaces(text, index + 5))
            second = None if first is None else _brace_group(text, _skip_spaces(text, first[1]))
            if first is None or second is None:
                raise _Refused(r"\frac without two brace groups")
            text = text[:index] + f"(({first[0]})/({second[0]}))" + text[second[1] :]
            changed = True
        index = text.find(r"\sqrt")
        if index >= 0:
            position = _skip_spaces(text, index + 5)
            root = None
            if position < len(text) and text[position] == "[":
                close = text.find("]", position)
                if close < 0:
                    raise _Refused(r"\sqrt[ without ]")
                root = text[position + 1 : close]
                position = _skip_spaces(text, close + 1)
            group = _brace_group(text, position)
            if group is None:
                replacement, end = " sqrt ", position
                if root is not None:
                    raise _Refused(r"\sqrt[n] without a brace group")
            elif root is None:
                replacement, end = f" sqrt(({group[0]}))", group[1]
            else:
                replacement, end = f"(({group[0]})^(1/({root})))", group[1]
            text = text[:index] + replacement + text[end:]
            changed = True
        if not changed:
            break
    if "\\" in text:
        raise _Refused("unsupported LaTeX command")
    return text.replace("{", "(").replace("}", ")")


def _skip_spaces(text: str, index: int) -> int:
    while index < len(text) and text[index].isspace():
        index += 1
    return index


def _expression_text(text: str) -> str:
    """The part of an answer that states the expression.

    The last ``\\boxed{}``; else the last ``$...$``/``\\(...\\)`` segment; else the last
    answer line; else the whole text. A simple left-hand side (``y =``, ``f(x) =``) is
    dropped; with several ``=`` the last right-hand side is kept.
    """
    prepared = _SUPERSCRIPT_RUN.sub(
        lambda run: "^(" + run.group(0).translate(_SUPERSCRIPTS) + ")", text
    )
    prepared = _prepare(prepared).replace("√", " sqrt ").replace("π", " pi ")
    prepared = prepared.replace("×", "*").replace("·", "*").replace("÷", "/")
    boxed = _last_boxed(prepared)
    if boxed is not None:
        chosen = boxed
    else:
        segments = [
            next(g for g in m.groups() if g is not None) for m in _MATH_SEGMENT.finditer(prepared)
        ]
        if segments:
            chosen = segments[-1]
        else:
            line = _answer_line(prepared)
            chosen = line if line is not None else prepared
    chosen = chosen.strip().rstrip(".。;；,，").strip()
    if len(chosen) > MAX_EXPRESSION_CHARS:
        raise _Refused("expression too long")
    if "=" in chosen:
        parts = chosen.split("=")
        if not _SIMPLE_LHS.match(parts[0]):
            raise _Refused("an equation, not an expression")
        chosen = parts[-1]
    return chosen


class _Parser:
    """Recursive-descent parser over whitelisted tokens that builds SymPy objects directly.

    Grammar: ``expr := term (('+'|'-') term)*``; ``term := unary (('*'|'/') unary |
    implicit unary)*``; ``unary := ('+'|'-') unary | power``; ``power := atom ('^' unary)?``
    (right-associative); ``atom := number | variable | pi | e | function [ '^' unary ]
    operand | '(' expr ')'``.
    """

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.position = 0
        self.depth = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise _Refused("unexpected end of expression")
        self.position += 1
        return token

    def expect(self, value: str) -> None:
        kind, text = self.take()
        if kind != "op" or text != value:
            raise _Refused(f"expected {value!r}")

    def parse(self) -> SympyExpr:
        result = self.expr()
        if self.peek() is not None:
            raise _Refused("trailing tokens")
        return result

    def enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _Refused("nested too deeply")

    def expr(self) -> SympyExpr:
        self.enter()
        result = self.term()
        while (token := self.peek()) is not None and token in (("op", "+"), ("op", "-")):
            self.take()
            right = self.term()
            result = result + right if token[1] == "+" else result - right
        self.depth -= 1
        return result

    def term(self) -> SympyExpr:
        result = self.unary()
        while (token := self.peek()) is not None:
            if token in (("op", "*"), ("op", "/")):
                self.take()
                right = self.unary()
                if token[1] == "/":
                    if right == 0:
                        raise _Refused("division by zero")
                    result = result / right
                else:
                    result = result * right
            elif token[0] in ("number", "name") or token == ("op", "("):
                result = result * self.power()
            else:
                break
        return result

    def unary(self) -> SympyExpr:
        token = self.peek()
        if token in (("op", "-"), ("op", "+")):
            self.take()
            self.enter()
            operand = self.unary()
            self.depth -= 1
            return -operand if token == ("op", "-") else operand
        return self.power()

    def power(self) -> SympyExpr:
        base = self.atom()
        if self.peek() == ("op", "^"):
            self.take()
            self.enter()
            exponent = self.unary()
            self.depth -= 1
            return _safe_power(base, exponent)
        return base

    def atom(self) -> SympyExpr:
        kind, text = self.take()
        if kind == "number":
            return sympy.Rational(*_fraction_parts(text))
        if kind == "name":
            if text in _CONSTANTS:
                return _CONSTANTS[text]
            if text in _FUNCTIONS:
                return self.function(text)
            return sympy.Symbol(text)
        if text == "(":
            inner = self.expr()
            self.expect(")")
            return inner
        raise _Refused(f"unexpected {text!r}")

    def function(self, name: str) -> SympyExpr:
        exponent = None
        if self.peek() == ("op", "^"):  # sin^2(x)
            self.take()
            exponent = self.unary()
        self.enter()
        argument = self.atom() if self.peek() == ("op", "(") else self.power()
        self.depth -= 1
        if name == "exp":
            _check_exp_argument(argument)
        value = _FUNCTIONS[name](argument)
        return value if exponent is None else _safe_power(value, exponent)


def _fraction_parts(text: str) -> tuple[int, int]:
    value = Fraction(text)
    return value.numerator, value.denominator


def _magnitude(value: SympyExpr) -> float | None:
    """``|value|`` as a float for a numeric SymPy value, None when not a finite real."""
    try:
        number = complex(value.evalf(15))
    except _SYMPY_ERRORS:
        return None
    magnitude = abs(number)
    return magnitude if math.isfinite(magnitude) else None


def _check_exp_argument(argument: SympyExpr) -> None:
    if argument.is_number:
        magnitude = _magnitude(argument)
        if magnitude is None or magnitude > _MAX_EXP_ARGUMENT:
            raise _Refused("exponential argument too large")


def _safe_power(base: SympyExpr, exponent: SympyExpr) -> SympyExpr:
    """``base ** exponent`` after bounding the work SymPy would do to evaluate it."""
    if exponent.is_number:
        size = _magnitude(exponent)
        if size is None or size > _MAX_SYMBOLIC_EXPONENT * 16:
            raise _Refused("exponent too large")
        if base.is_number:
            base_size = _magnitude(base)
            if base_size is None:
                raise _Refused("base is not a finite number")
            if base_size > 1 and size * math.log2(base_size) > _MAX_RESULT_BITS:
                raise _Refused("power too large")
            if 0 < base_size < 1 and size * -math.log2(base_size) > _MAX_RESULT_BITS:
                raise _Refused("power too small")
        elif size > _MAX_SYMBOLIC_EXPONENT:
            raise _Refused("exponent too large for a symbolic base")
    if base == 0 and exponent.is_number and exponent.is_nonpositive:
        raise _Refused("zero to a non-positive power")
    return sympy.Pow(base, exponent)


def _tokens(text: str) -> list[tuple[str, str]]:
    """Whitelisted tokens; letter runs split into known names and single-letter variables."""
    tokens: list[tuple[str, str]] = []
    position = 0
    previous_name_run = False
    while position < len(text):
        found = _TOKEN.match(text, position)
        if found is None or found.end() == position:
            if text[position:].strip() == "":
                break
            raise _Refused(f"unexpected character {text[position]!r}")
        spaced = found.group(0)[:1].isspace()
        position = found.end()
        if found.group("number") is not None:
            if tokens and not spaced and tokens[-1][0] == "name" and len(tokens[-1][1]) == 1:
                raise _Refused("a letter followed by digits (H2O, x2) is not a formula")
            tokens.append(("number", found.group("number")))
            previous_name_run = False
        elif found.group("name") is not None:
            run = found.group("name")
            pieces = _split_name_run(run)
            unknown = any(piece not in _FUNCTIONS and piece != "pi" for piece in pieces)
            if spaced and previous_name_run and unknown:
                raise _Refused("words, not a formula")
            tokens.extend(("name", piece) for piece in pieces)
            previous_name_run = unknown
        else:
            tokens.append(("op", found.group("op")))
            previous_name_run = False
    return tokens


def _split_name_run(run: str) -> list[str]:
    """``"sinx"`` -> ``["sin", "x"]``; refuse runs with more than two single letters."""
    pieces: list[str] = []
    index = 0
    while index < len(run):
        for name in _NAMES:
            if run.startswith(name, index):
                pieces.append(name)
                index += len(name)
                break
        else:
            pieces.append(run[index])
            index += 1
    if sum(len(piece) == 1 for piece in pieces) > 2:
        raise _Refused(f"{run!r} is a word, not a formula")
    return pieces


def _tower(expr: SympyExpr) -> int:
    """Height of the tower of exponentials with non-constant exponents."""
    if isinstance(expr, sympy.exp):
        return 1 + _tower(expr.args[0])
    if isinstance(expr, sympy.Pow) and not expr.exp.is_number:
        return max(_tower(expr.base), 1 + _tower(expr.exp))
    return max((_tower(arg) for arg in expr.args), default=0)


def _parse_expression(text: str) -> SympyExpr:
    """Parse untrusted text into a SymPy expression; raise :class:`_Refused` if unsafe."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise _Refused("expression too long")
    if "__" in text:
        raise _Refused("double underscore")
    converted = _convert_latex(text).replace("**", "^")
    if len(converted) > _MAX_CONVERTED_CHARS:
        raise _Refused("expression too long")
    if not _ALLOWED.fullmatch(converted):
        raise _Refused("characters outside the whitelist")
    tokens = _tokens(converted)
    if not tokens:
        raise _Refused("empty expression")
    expression = _Parser(tokens).parse()
    if _tower(expression) > _MAX_TOWER:
        raise _Refused("tower of exponentials")
    return expression


def _parse_answer(text: str) -> SympyExpr | None:
    try:
        return _parse_expression(_expression_text(text))
    except _Refused:
        return None
    except _SYMPY_ERRORS:
        return None


def _constant_value(answer: str) -> float | None:
    """The real value of the answer's expression when it has no variables, else None."""
    expression = _parse_answer(answer)
    if expression is None or expression.free_symbols:
        return None
    try:
        value = complex(expression.evalf(30))
    except _SYMPY_ERRORS:
        return None
    if not math.isfinite(value.real) or abs(value.imag) > 1e-12 * max(1.0, abs(value.real)):
        return None
    return value.real


def looks_like_formula(reference: str) -> bool:
    """True when ``reference`` is a formula the safe parser accepts (``x^2+2x``,
    ``\\frac{1}{2}``, ``sqrt(2)``) rather than words or a bare name (``Paris``, ``No``)."""
    prepared = _prepare(reference)
    if not re.search(r"[0-9+\-*/^()=\\√π]", prepared):
        return False
    return _parse_answer(reference) is not None


def _numeric_probe(left: SympyExpr, right: SympyExpr) -> tuple[int, int, bool]:
    """Evaluate both sides at fixed pseudo-random points.

    Returns ``(points agreeing, points evaluated, a positive point disagreed)``. Points are
    half positive (where real-domain identities such as ``ln(x^2) = 2 ln x`` hold) and
    half negative.
    """
    symbols = sorted(left.free_symbols | right.free_symbols, key=lambda symbol: symbol.name)
    generator = random.Random(20240531)
    agree = evaluated = 0
    positive_disagreement = False
    for probe in range(_NUMERIC_PROBES):
        sign = 1 if probe % 2 == 0 else -1
        point = {
            symbol: sympy.Rational(sign * generator.randint(110, 290), 97) for symbol in symbols
        }
        try:
            a = complex(left.evalf(30, subs=point))
            b = complex(right.evalf(30, subs=point))
        except _SYMPY_ERRORS:
            continue
        if not all(math.isfinite(part) for part in (a.real, a.imag, b.real, b.imag)):
            continue
        evaluated += 1
        if abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b)):
            agree += 1
        elif sign > 0:
            positive_disagreement = True
        if not symbols:
            break
    return agree, evaluated, positive_disagreement


def _cheap_to_simplify(expression: SympyExpr) -> bool:
    """Small enough that ``simplify`` stays fast: few operations, small integer powers."""
    if sympy.count_ops(expression) > _MAX_SIMPLIFY_OPS:
        return False
    for power in expression.atoms(sympy.Pow):
        if power.exp.is_Integer and abs(int(power.exp)) > _MAX_SIMPLIFY_POWER:
            return False
    return True


def match_symbolic(answer: str, reference: str) -> Match:
    """Symbolic equality of the answer's expression and the reference expression.

    The expression is taken from the last ``\\boxed{}``, ``$...$`` segment or answer line
    (a simple left-hand side ``y =`` / ``f(x) =`` is dropped). Simple LaTeX is converted
    (``\\frac``, ``\\sqrt``, ``\\sqrt[n]``, ``\\cdot``, ``\\times``, ``^{}``, ``\\left(``,
    ``\\pi``, ``\\sin``...), then the text must consist only of digits, ``+ - * / ^ ( ) .``,
    spaces, the names ``sin cos tan log ln exp sqrt pi e`` and single-letter variables
    (``2xy`` is ``2*x*y``; ``log`` and ``ln`` are the natural logarithm). Everything else -
    quotes, ``__``, brackets, subscripts, words (a letter run with more than two variables,
    two letter runs side by side), a letter followed by digits (``H2O``), more than 200
    characters - is refused, and so
    are exponents above 1024 (above 64 on a symbolic base), numeric powers above 4096 bits
    and towers of exponentials.

    Decision: equal if ``a - b`` is 0 after SymPy's automatic canonicalisation
    (``x(x+2)`` vs ``x^2+2x`` is not caught here: nothing is expanded, because expanding
    ``(x+y+z+1)^64`` would hang). Otherwise both sides are evaluated at six fixed
    pseudo-random points (half positive, half negative; 30 digits; equal within a relative
    1e-9): a disagreement at a positive point -> False; agreement at every point -> True
    (this is what SymPy's ``equals`` does too); agreement only at the positive points ->
    None (equal on a restricted domain only, e.g. ``ln(x^2)`` vs ``2ln(x)``,
    ``sqrt(x^2)`` vs ``x``). When no point evaluates to a finite number,
    ``simplify(a - b) == 0`` decides True - only for expressions of at most 40 operations
    and integer powers up to 8, so it stays cheap - else None.

    Returns None when either side is not parseable.
    """
    expected = _parse_answer(reference)
    if expected is None:
        return Match(None, "symbolic", f"reference {reference[:40]!r} is not a formula")
    got = _parse_answer(answer)
    if got is None:
        return Match(None, "symbolic", "no parseable expression in the answer")
    shown = f"{sympy.sstr(got)[:60]} vs {sympy.sstr(expected)[:60]}"
    try:
        difference = got - expected  # SymPy's automatic canonicalisation only
        if difference == 0:
            return Match(True, "symbolic", f"{shown}: a - b == 0")
        agree, evaluated, positive_disagreement = _numeric_probe(got, expected)
        if positive_disagreement:
            return Match(False, "symbolic", f"{shown}: differ numerically")
        if evaluated and agree == evaluated:
            return Match(True, "symbolic", f"{shown}: equal at {evaluated} numeric points")
        if evaluated:
            return Match(None, "symbolic", f"{shown}: equal only for positive values")
        if _cheap_to_simplify(difference) and sympy.simplify(difference) == 0:
            return Match(True, "symbolic", f"{shown}: simplify(a - b) == 0")
    except _SYMPY_ERRORS:
        return Match(None, "symbolic", f"{shown}: could not compare")
    return Match(None, "symbolic", f"{shown}: could not decide")


# --------------------------------------------------------------------------- #
# Dispatch
# --------------------------------------------------------------------------- #

_LETTER_REFERENCE = re.compile(r"^\s*[A-Z]{1,10}\s*$")
_NO_LETTER_ROUTING = frozenset({"fill_in", "calculation", "dictation", "error_correction"})


def objective_match(
    *,
    qtype: str,
    answer: str,
    reference: str,
    options: Sequence[str] | None,
    language: str,
) -> Match:
    """Decide an answer objectively where possible.

    * ``true_false`` -> :func:`match_true_false`;
    * ``multiple_choice`` -> :func:`match_choice`;
    * a numbered letter reference (``"1. A; 2. C"``, GAOKAO cloze and grouped items), or a
      letter group (``"AC"``) for any type other than fill-in, calculation, dictation and
      error correction -> :func:`match_choice`;
    * otherwise: a numeric reference -> :func:`match_number` (which also evaluates
      closed-form expressions); a formula reference (:func:`looks_like_formula`) ->
      :func:`match_symbolic`; whatever they leave undecided gets :func:`match_exact` on
      the whole answer and on its answer line, **as a confirmation only**: an exact match
      is correct, no exact match is None (a differently worded free answer may still be
      right; the similarity filter or judge decides).

    ``language`` ("en"/"zh") is accepted for the callers' convenience; every matcher
    recognises both languages, so it does not change the outcome.
    """
    del language  # both languages are always recognised
    if qtype == "true_false":
        return match_true_false(answer, reference)
    if qtype == "multiple_choice":
        return match_choice(answer, reference, options)
    prepared_reference = _prepare(reference).strip()
    if _NUMBERED_REFERENCE.match(prepared_reference) or (
        qtype not in _NO_LETTER_ROUTING and _LETTER_REFERENCE.match(prepared_reference)
    ):
        return match_choice(answer, reference, options)
    undecided: Match | None = None
    if _reference_quantity(reference) is not None:
        undecided = match_number(answer, reference)
    elif looks_like_formula(reference):
        undecided = match_symbolic(answer, reference)
    if undecided is not None and undecided.correct is not None:
        return undecided
    exact = match_exact(answer, reference)
    if exact.correct:
        return exact
    line = _answer_line(_prepare(answer))
    if line is not None:
        from_line = match_exact(line, reference)
        if from_line.correct:
            return Match(True, "exact", f"answer line: {from_line.detail}")
    if undecided is not None:
        return undecided
    return Match(
        None, "exact", "no exact match; a free answer needs the similarity filter or judge"
    )
