"""Normalised exact match: :func:`normalise_answer` and :func:`match_exact`.

Both sides are normalised (NFKC, casefold, a leading answer label, a wrapping
``\\boxed{}``, whitespace and most punctuation removed) and compared as strings. It is
the last resort for free answers (see :mod:`judge.matchers.dispatch`), and
:mod:`judge.matchers.choice` uses :func:`normalise_answer` to recognise an option by its
text.
"""

from __future__ import annotations

import unicodedata

from judge.matchers.outcome import Match
from judge.matchers.text import LEADING_LABEL, last_boxed, prepare

_KEEP_PUNCTUATION = frozenset("-/%()[]{}")


def normalise_answer(text: str) -> str:
    """Normalise ``text`` for exact comparison.

    NFKC, casefold, a leading answer label removed (``Answer:``, ``The answer is``,
    ``答案：``, ``答：``), a wrapping ``\\boxed{}`` and ``$`` removed, then every whitespace
    character and every Unicode punctuation character (ASCII and Chinese) dropped, except
    ``- / % ( ) [ ] { }`` and a ``.`` between two digits, which can change meaning.
    """
    prepared = prepare(text).casefold().strip()
    prepared = LEADING_LABEL.sub("", prepared, count=1)
    boxed = last_boxed(prepared)
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
