"""Which matcher decides an item: :func:`objective_match`.

The item's ``qtype`` and the shape of its reference choose the matcher (true/false,
choice, number, symbolic); exact match only confirms what they leave undecided. What no
matcher decides stays None for the similarity filter or the LLM judge.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from judge.matchers.choice import NUMBERED_REFERENCE, match_choice
from judge.matchers.exact import match_exact
from judge.matchers.numbers import match_number, reference_quantity
from judge.matchers.outcome import Match
from judge.matchers.symbolic import looks_like_formula, match_symbolic
from judge.matchers.text import answer_line, prepare
from judge.matchers.true_false import match_true_false

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
    prepared_reference = prepare(reference).strip()
    if NUMBERED_REFERENCE.match(prepared_reference) or (
        qtype not in _NO_LETTER_ROUTING and _LETTER_REFERENCE.match(prepared_reference)
    ):
        return match_choice(answer, reference, options)
    undecided: Match | None = None
    if reference_quantity(reference) is not None:
        undecided = match_number(answer, reference)
    elif looks_like_formula(reference):
        undecided = match_symbolic(answer, reference)
    if undecided is not None and undecided.correct is not None:
        return undecided
    exact = match_exact(answer, reference)
    if exact.correct:
        return exact
    line = answer_line(prepare(answer))
    if line is not None:
        from_line = match_exact(line, reference)
        if from_line.correct:
            return Match(True, "exact", f"answer line: {from_line.detail}")
    if undecided is not None:
        return undecided
    return Match(
        None, "exact", "no exact match; a free answer needs the similarity filter or judge"
    )
