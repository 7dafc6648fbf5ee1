"""True/false verdicts in English and Chinese: :func:`match_true_false`.

The answer's verdict is the first one in its last labelled answer line (``Answer:``,
``答案：``), else in the whole text. Negations flip a verdict; verdicts in questions,
conditional clauses, quoted option text and phrases such as "the correct answer is" are
skipped; a verdict paired with its opposite ("true or false", "√/×") is ambiguous, i.e.
None. :func:`match_true_false` lists the recognised forms.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

from judge.matchers.outcome import Match
from judge.matchers.text import STRONG_LABEL, prepare

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
    prepared = prepare(text)
    strong = list(STRONG_LABEL.finditer(prepared))
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
