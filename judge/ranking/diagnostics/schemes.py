"""Weighting schemes of the Rank Stability Amplitude (ReLE §3.5, §6.1).

A scheme maps dimensions to non-negative weights. :data:`RELE_SCHEMES` holds the three
schemes of "ReLE: A Scalable System and Structured Benchmark for Diagnosing Capability
Anisotropy in Chinese LLMs" (§6.1), mapped onto the ten disciplines of LLMEval-Fair
(Zhang et al., table 8); :func:`rele_schemes_for` fits them to a table's own dimension
names; :func:`validate_schemes` checks schemes of one's own (``proctor analyze
--schemes``), listing every problem in a :class:`SchemeError`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Real

LLMEVAL_FAIR_DISCIPLINES: tuple[str, ...] = (
    "Engineering",
    "Economics",
    "Education",
    "Law",
    "Literature",
    "Management",
    "Science",
    "History",
    "Medicine",
    "Military",
)
"""The ten evaluated disciplines of LLMEval-Fair (§2.1, table 8), in table 8's order."""

RELE_DOMAIN_DISCIPLINES: dict[str, tuple[str, ...]] = {
    "Language & Instruction": ("Literature",),
    "Reasoning & Math": ("Science", "Engineering"),
    "Education": ("Education",),
    "Healthcare": ("Medicine",),
    "Finance": ("Economics",),
    "Law & Public Admin": ("Law",),
    "Agent & Tool Use": (),
}
"""ReLE's seven core domains (table 3) -> the LLMEval-Fair disciplines they
cover. Literature (Chinese language and literature) stands for language; Science (which
holds mathematics) and Engineering for reasoning and maths. Management, History and
Military have no ReLE counterpart and are "others" in every scheme; no discipline
measures agent and tool use."""


def restricted_scheme(weights: Mapping[str, float]) -> dict[str, float]:
    """``weights`` renormalised to sum to 1 (the scheme restricted to these dimensions)."""
    total = math.fsum(weights.values())
    return {name: weight / total for name, weight in weights.items()}


def _rele_scheme(groups: Mapping[tuple[str, ...], float], rest: float) -> dict[str, float]:
    """Spread each group of ReLE domains' share evenly over the group's disciplines and
    ``rest`` evenly over the disciplines of no group; drop shares with no discipline;
    normalise to sum 1."""
    weights: dict[str, float] = {}
    for domains, share in groups.items():
        members = [d for domain in domains for d in RELE_DOMAIN_DISCIPLINES[domain]]
        for discipline in members:
            weights[discipline] = share / len(members)
    others = [d for d in LLMEVAL_FAIR_DISCIPLINES if d not in weights]
    for discipline in others:
        weights[discipline] = rest / len(others)
    return restricted_scheme({d: weights[d] for d in LLMEVAL_FAIR_DISCIPLINES})


RELE_SCHEMES: dict[str, dict[str, float]] = {
    "general": _rele_scheme(
        {("Language & Instruction",): 0.40, ("Reasoning & Math",): 0.20}, rest=0.40
    ),
    "professional": _rele_scheme(
        {("Education", "Healthcare", "Finance", "Law & Public Admin"): 0.60}, rest=0.40
    ),
    "reasoning": _rele_scheme(
        {("Reasoning & Math",): 0.50, ("Agent & Tool Use",): 0.20}, rest=0.30
    ),
}
"""ReLE's three weighting schemes (§6.1) on the ten LLMEval-Fair disciplines.

Each scheme gives shares to groups of ReLE domains (mapped to disciplines by
:data:`RELE_DOMAIN_DISCIPLINES`), splits a group's share evenly across its disciplines and
the remaining share evenly across the disciplines outside the named groups; weights are
normalised to sum to 1.

* ``general`` (General-heavy, "balanced"): 40% language (Literature), 20% reasoning
  (Science, Engineering 10% each), and the remaining 40% over the seven other disciplines
  (4/70 each). The paper's "10% for others" cannot hold per domain with five other ReLE
  domains (40 + 20 + 5 x 10 = 110%); it is read as "the rest, shared by the others".
* ``professional`` (Professional-heavy): 60% on Education, Medicine, Economics (finance)
  and Law (15% each), 40% over the six others (1/15 each).
* ``reasoning`` (Reasoning-heavy, cost-sensitive): 50% on reasoning and maths (Science,
  Engineering), 20% on agent tasks, 30% over the eight others. No discipline measures
  agent tasks, so that 20% is dropped and the rest renormalised: 62.5% on Science and
  Engineering (31.25% each), 37.5% over the others (4.6875% each), keeping the paper's
  5 : 3 ratio between reasoning and the rest.
"""


def rele_schemes_for(dimensions: Sequence[str]) -> dict[str, dict[str, float]] | None:
    """ReLE's schemes keyed by ``dimensions``' own spelling, or None when ``dimensions``
    are not LLMEval-Fair disciplines.

    Names match case-insensitively, so the bank's discipline keys (``"law"``) and table 8's
    headers (``"Law"``) both get the schemes. On at least two of the ten and no other (a
    bank without, say, Military items) each scheme keeps its weights on the disciplines
    present, renormalised to sum to 1 (:func:`restricted_scheme`): the relative emphasis
    ReLE gives them is kept, the absent ones drop out. None for fewer than two, or for any
    dimension outside the ten (whose weight ReLE does not say).
    """
    spelling = {name.casefold(): name for name in dimensions}
    ten = {d.casefold() for d in LLMEVAL_FAIR_DISCIPLINES}
    if len(spelling) != len(dimensions) or len(spelling) < 2 or not set(spelling) <= ten:
        return None
    return {
        scheme: restricted_scheme(
            {spelling[d.casefold()]: w for d, w in weights.items() if d.casefold() in spelling}
        )
        for scheme, weights in RELE_SCHEMES.items()
    }


class SchemeError(ValueError):
    """Weighting schemes that cannot be used; ``problems`` lists every problem found."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def validate_schemes(schemes: object, dimensions: Sequence[str]) -> dict[str, dict[str, float]]:
    """Check weighting schemes ``{"scheme": {"dimension": weight, ...}, ...}``.

    The format of ``proctor analyze --schemes``, e.g. parsed JSON. A scheme
    names some or all of ``dimensions``; a dimension it does not name has weight 0.
    Weights are finite non-negative numbers (not booleans) and each scheme's weights have
    a positive sum; they need not sum to 1
    (:func:`~judge.ranking.diagnostics.rank_stability.rank_stability_amplitude` normalises
    them).

    Parameters
    ----------
    schemes : object
        The candidate schemes.
    dimensions : sequence of str
        The dimensions of the score matrix.

    Returns
    -------
    dict of str to dict of str to float
        The schemes, with weights as floats, in the given order.

    Raises
    ------
    SchemeError
        Listing every problem: not a non-empty object of objects, an empty scheme name or
        scheme, an unknown dimension (named, with the known ones), a weight that is not a
        finite number or is negative, or a scheme whose weights are all 0.
    """
    if not isinstance(schemes, Mapping) or not schemes:
        raise SchemeError(
            ['expected a non-empty object {"scheme": {"dimension": weight, ...}, ...}']
        )
    known = set(dimensions)
    problems: list[str] = []
    valid: dict[str, dict[str, float]] = {}
    for name, weights in schemes.items():
        where = f"scheme {name!r}"
        if not isinstance(name, str) or not name:
            problems.append(f"{where}: a scheme name must be a non-empty string")
            continue
        if not isinstance(weights, Mapping) or not weights:
            problems.append(f'{where}: expected a non-empty object {{"dimension": weight}}')
            continue
        checked: dict[str, float] = {}
        before = len(problems)
        for dimension, weight in weights.items():
            if dimension not in known:
                problems.append(
                    f"{where}: unknown dimension {dimension!r} "
                    f"(dimensions: {', '.join(dimensions)})"
                )
            elif isinstance(weight, bool) or not isinstance(weight, Real):
                problems.append(f"{where}: {dimension}: weight {weight!r} is not a number")
            elif not math.isfinite(float(weight)):
                problems.append(f"{where}: {dimension}: weight {weight!r} is not finite")
            elif weight < 0:
                problems.append(f"{where}: {dimension}: weight {weight!r} is negative")
            else:
                checked[dimension] = float(weight)
        if len(problems) == before and math.fsum(checked.values()) <= 0:
            problems.append(f"{where}: the weights sum to 0")
        valid[name] = checked
    if problems:
        raise SchemeError(problems)
    return valid


__all__ = [
    "LLMEVAL_FAIR_DISCIPLINES",
    "RELE_DOMAIN_DISCIPLINES",
    "RELE_SCHEMES",
    "SchemeError",
    "rele_schemes_for",
    "restricted_scheme",
    "validate_schemes",
]
