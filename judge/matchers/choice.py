"""Option letters of multiple-choice and grouped items: :func:`match_choice`.

The reference is a letter (``"C"``), a multi-select group (``"AC"``), a numbered list of
sub-answers (``"1. A; 2. C"``, :data:`NUMBERED_REFERENCE`, which
:mod:`judge.matchers.dispatch` also routes on) or an option's text. The answer's letters
are read from, in priority order, ``\\boxed{}``, bare letters, labelled phrases
(``answer is C``, ``答案：C``, ``故选C``), option markers and, in a short answer, a lone
letter; multi-select compares as a set. An answer naming several different answers is
undecided (None).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from judge.matchers.exact import normalise_answer
from judge.matchers.outcome import Match
from judge.matchers.text import last_boxed, prepare

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
NUMBERED_REFERENCE = re.compile(
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
    boxed = last_boxed(text)
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
    ref = prepare(reference).strip()
    text = prepare(answer)
    if NUMBERED_REFERENCE.match(ref):
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
