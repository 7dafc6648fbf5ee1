"""Deterministic matchers for objective answers (ReLE §3.2 tier 1).

Every matcher takes the model's final answer (reasoning trace already removed, see
:mod:`judge.reasoning`) and the item's reference answer, and returns a :class:`Match`:
True or False when it decides objectively, None when it cannot (the caller then uses the
similarity filter or the LLM judge). A matcher never guesses: when in doubt it says None.
All functions are pure and total on ``str`` input (they do not raise on odd text).

One concept per module; each module's docstring states its contract:

* :mod:`~judge.matchers.outcome`: :class:`Match` and :class:`ScorePolicy` (0-3 rubric);
* :mod:`~judge.matchers.text`: shared normalisation, answer lines and ``\\boxed{}``;
* :mod:`~judge.matchers.exact`: :func:`normalise_answer`, :func:`match_exact`;
* :mod:`~judge.matchers.true_false`: :func:`match_true_false`;
* :mod:`~judge.matchers.choice`: :func:`match_choice`;
* :mod:`~judge.matchers.numbers`: :func:`match_number`, with the unit table
  :data:`UNITS` in :mod:`~judge.matchers.units`;
* :mod:`~judge.matchers.symbolic_parser`: the safe parser from untrusted text to SymPy
  (every safety limit lives there);
* :mod:`~judge.matchers.symbolic`: :func:`match_symbolic`, :func:`looks_like_formula`;
* :mod:`~judge.matchers.dispatch`: :func:`objective_match`, which picks the matcher.

Imports flow one way: ``outcome`` and ``text`` at the bottom, then ``exact``,
``true_false``, ``choice``, ``units``, ``symbolic_parser`` -> ``symbolic`` -> ``numbers``,
and ``dispatch`` on top.
"""

from __future__ import annotations

from judge.matchers.choice import match_choice
from judge.matchers.dispatch import objective_match
from judge.matchers.exact import match_exact, normalise_answer
from judge.matchers.numbers import match_number
from judge.matchers.outcome import Match, ScorePolicy
from judge.matchers.symbolic import looks_like_formula, match_symbolic
from judge.matchers.true_false import match_true_false
from judge.matchers.units import UNITS

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
