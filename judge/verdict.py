"""Reading a 0-3 rating out of a judge's reply (LLMEval-Fair (Zhang et al.) app. B, fig. 11).

Judges answer in many shapes: the fig. 11 text form (``"Overall Rating": 3``), markdown
(``**Overall Rating:** 3 stars``), JSON (``{"rating": 2, "reason": "..."}``, possibly in a
code fence), Chinese (``总体评分：2星``). ``parse_verdict`` accepts these and nothing
looser: a bare digit somewhere in the reply is not a rating.

Only the judge's own words count. Before looking for a rating the parser removes every
fenced answer (``judge.prompts.FENCE_RE``) and every verbatim copy of the answer under
review, so an answer that says "Overall Rating: 3" cannot lend the judge its rating even
when the judge echoes its input. If what remains states two different ratings, the reply
is ambiguous and unparseable; the caller retries once with a format reminder and then
marks the answer ``needs_review`` -- it is never scored 0 by default.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from judge.prompts import FENCE_RE
from judge.rubric import MAX_SCORE, MIN_SCORE

RATING_MIN, RATING_MAX = MIN_SCORE, MAX_SCORE
_CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3}
_NUMBER = r"(?P<value>[0-9]+(?:\.[0-9]+)?|[零〇一二两三])"
_KEYS = r"overall[ _]?rating|\brating|\bstars|总体评分|总评分|综合评分|评分|评级|星级"
_RATING_KEY_RE = re.compile(_KEYS, re.IGNORECASE)

_TEXT_RE = re.compile(
    r"(?:"
    + _KEYS
    + r")[\"'“”* \t]*(?:\(\s*int\s*\))?[\"'“”* \t]*[:：=][\"'“”* \t]*"
    + _NUMBER
    + r"(?!\s*/\s*(?!3\b)[0-9])",
    re.IGNORECASE,
)
_JSON_KEYS = ("overall rating", "overall_rating", "overallrating", "rating", "score", "stars")
_JSON_KEYS_ZH = ("总体评分", "总评分", "综合评分", "评分")
_JSON_RE = re.compile(r"\{[^{}]*\}", re.S)
_REASON_RE = re.compile(
    r"(?:the reason why you gave this rating|reason|理由)[\"'“”*\s]*[:：][\"'“”*\s]*(?P<reason>.+)",
    re.IGNORECASE | re.S,
)


class UnparseableVerdict(ValueError):
    """The reply states no rating 0-3, or states two different ones."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A rating read from a judge's reply."""

    rating: int
    reason: str | None
    form: str
    """``json`` or ``text``: which form the rating was read from."""


def parse_verdict(reply: str, *, answer: str | None = None) -> Verdict:
    """Read the 0-3 rating from a judge's ``reply``.

    Parameters
    ----------
    reply
        The judge's message content.
    answer
        The answer under review; verbatim copies of it (and fenced answers) are removed
        from the reply first, so text inside the answer can never become the rating.

    Raises
    ------
    UnparseableVerdict
        No rating in 0-3 is stated, a stated rating is out of range or fractional, or two
        different ratings are stated.
    """
    own_words = _strip_answer(reply, answer)
    found = _json_ratings(own_words)
    form = "json"
    if not found:
        found = _text_ratings(own_words)
        form = "text"
    if not found:
        raise UnparseableVerdict("no 'Overall Rating' between 0 and 3 in the reply")
    values = {value for value, _ in found}
    if len(values) > 1:
        raise UnparseableVerdict(f"the reply states several ratings: {sorted(values)}")
    rating, reason = found[0]
    if reason is None:
        reason = _reason(own_words)
    return Verdict(rating=rating, reason=reason, form=form)


def _strip_answer(reply: str, answer: str | None) -> str:
    """The reply without fenced answers and, when the answer names a rating, without its
    verbatim copies. An answer that names none (``3``, ``Paris``) cannot lend the judge a
    rating, and removing its copies would remove the judge's own rating with them."""
    text = FENCE_RE.sub(" ", reply)
    if answer and answer.strip() and _RATING_KEY_RE.search(answer):
        text = text.replace(answer.strip(), " ")
    return text


def _as_rating(raw: object) -> int:
    """``raw`` as a rating 0-3, or raise ``UnparseableVerdict``."""
    if isinstance(raw, bool):
        raise UnparseableVerdict(f"rating {raw!r} is not a number")
    if isinstance(raw, str):
        text = raw.strip()
        match = re.match(r"^" + _NUMBER, text)
        if not match:
            raise UnparseableVerdict(f"rating {raw!r} is not a number")
        raw = match["value"]
        raw = _CN_DIGITS[raw] if raw in _CN_DIGITS else float(raw)
    if not isinstance(raw, int | float):
        raise UnparseableVerdict(f"rating {raw!r} is not a number")
    if raw != int(raw) or not RATING_MIN <= raw <= RATING_MAX:
        raise UnparseableVerdict(f"rating {raw!r} is not a whole number from 0 to 3")
    return int(raw)


def _json_ratings(text: str) -> list[tuple[int, str | None]]:
    found: list[tuple[int, str | None]] = []
    for block in _JSON_RE.findall(text):
        try:
            data = json.loads(block)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        keyed = {str(k).strip().lower(): v for k, v in data.items()}
        for key in (*_JSON_KEYS, *_JSON_KEYS_ZH):
            if key in keyed:
                reason = keyed.get("reason") or keyed.get("理由")
                found.append((_as_rating(keyed[key]), reason if isinstance(reason, str) else None))
                break
    return found


def _text_ratings(text: str) -> list[tuple[int, str | None]]:
    return [(_as_rating(m["value"]), None) for m in _TEXT_RE.finditer(text)]


def _reason(text: str) -> str | None:
    match = _REASON_RE.search(text)
    return match["reason"].strip() if match else None
