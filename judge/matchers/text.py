"""Text helpers shared by the matchers: normalisation, answer lines, ``\\boxed{}``.

* :func:`prepare`: NFKC (full-width to ASCII) and plain minus signs; every matcher applies
  it before matching;
* :data:`STRONG_LABEL` and :func:`answer_line`: the text after the last answer label
  (``Answer:``, ``**Final answer**:``, ``答案：``), else after the last inline answer phrase
  (``the answer is``, ``答案为``);
* :data:`LEADING_LABEL`: an answer label at the start of a short answer, to strip;
* :func:`brace_group` and :func:`last_boxed`: a balanced ``{...}`` group (at most 2,000
  characters) and the content of the last ``\\boxed{...}`` (only the last 20 are tried).

All helpers are pure and total on ``str`` input.
"""

from __future__ import annotations

import re
import unicodedata

_MINUS_SIGNS = str.maketrans(
    {"\u2212": "-", "\u2013": "-", "\u2010": "-", "\u2011": "-", "\u2044": "/"}
)

# A line that starts with an answer label: "Answer:", "**Final answer**:", "答案：", "答：".
STRONG_LABEL = re.compile(
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


def prepare(text: str) -> str:
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


def answer_line(text: str) -> str | None:
    """The content of the last answer label line (strong labels first), if any."""
    strong = list(STRONG_LABEL.finditer(text))
    if strong:
        return _rest_of_line(text, strong[-1].end())
    weak = list(_WEAK_LABEL.finditer(text))
    if weak:
        return _rest_of_line(text, weak[-1].end())
    return None


_MAX_BRACE_GROUP = 2000


def brace_group(text: str, start: int) -> tuple[str, int] | None:
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


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}``, or None."""
    for found in reversed(list(_BOXED.finditer(text))[-_MAX_BOXED:]):
        group = brace_group(text, found.end())
        if group is not None:
            return group[0]
    return None


LEADING_LABEL = re.compile(
    r"^\s*(?:(?:the\s+)?(?:final\s+|correct\s+)?answer\s*(?:is|:)|最终答案|正确答案|答案|答)"
    r"\s*(?:(?:是|为|:)\s*)?(?::\s*)?",
    re.IGNORECASE,
)
