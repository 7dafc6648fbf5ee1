"""Separating a reasoning trace from the final answer ("ReLE: A Scalable
System and Structured Benchmark for Diagnosing Capability Anisotropy in Chinese LLMs", §3.1).

Reasoning models wrap their chain of thought in ``<think>...</think>`` (some use
``<thinking>`` or ``<reasoning>``). The trace is stored apart and only the final answer is
judged, so a model is neither rewarded nor penalised for what it wrote while thinking.

Contract of :func:`split_reasoning` (pure, total: it never raises):

* Tags are ``<think>``, ``<thinking>`` and ``<reasoning>`` with their closing forms,
  matched case-insensitively and with optional blanks inside the angle brackets
  (``< THINK >``, ``</ think>``). An opener may be closed by any closing tag.
* Text outside every block is the final answer: its pieces are concatenated as written
  (so ``"x = <think>..</think>3"`` gives ``"x = 3"``) and the result is stripped.
* Text inside blocks is the trace: the stripped, non-empty blocks are joined with a blank
  line. Blocks nest: ``<think>a<think>b</think>c</think>`` is one trace ``a``/``b``/``c``.
* An unclosed opener (a truncated output) makes everything after it trace; the final
  answer is then only the text before the opener, which is usually "".
* A stray closing tag with no open block (DeepSeek-R1 style, where the chat template
  already emitted ``<think>``) turns all the final-answer text seen so far into trace.
* The trace is ``None`` exactly when the text contains no reasoning tag at all; it is
  ``""`` when tags are present but hold nothing (``<think></think>42``).
* No non-tag character is lost: every character outside the tags ends up in the final
  answer or in the trace (only surrounding whitespace is trimmed).
"""

from __future__ import annotations

import re

__all__ = ["REASONING_TAGS", "split_reasoning"]

REASONING_TAGS: tuple[str, ...] = ("think", "thinking", "reasoning")
"""Tag names that delimit a reasoning trace."""

_TAG = re.compile(
    r"<\s*(?:(?P<close>/)\s*)?(?:" + "|".join(REASONING_TAGS) + r")\s*>",
    re.IGNORECASE,
)
_TRACE_SEPARATOR = "\n\n"


def split_reasoning(text: str) -> tuple[str, str | None]:
    """Split a model output into ``(final answer, reasoning trace)``.

    Parameters
    ----------
    text:
        The raw completion text.

    Returns
    -------
    tuple[str, str | None]
        The stripped final answer and the trace (stripped blocks joined by a blank line),
        or ``(text.strip(), None)`` when ``text`` has no reasoning tag. See the module
        docstring for unclosed openers and stray closers.
    """
    if _TAG.search(text) is None:
        return text.strip(), None

    # (is_trace, text) in document order, so a stray closer can relabel what preceded it.
    segments: list[tuple[bool, str]] = []
    depth = 0
    position = 0
    for tag in _TAG.finditer(text):
        segments.append((depth > 0, text[position : tag.start()]))
        position = tag.end()
        if tag.group("close") is None:
            depth += 1
        elif depth > 0:
            depth -= 1
        else:
            # A closer without an opener: everything answered so far was reasoning.
            segments = [(True, piece) for _, piece in segments]
    segments.append((depth > 0, text[position:]))

    final = "".join(piece for is_trace, piece in segments if not is_trace).strip()
    trace = _TRACE_SEPARATOR.join(
        piece.strip() for is_trace, piece in segments if is_trace and piece.strip()
    )
    return final, trace
