"""Which models a health result is computed on.

Discriminability, saturation and CAS are properties of an item pool *and* a model
population, not of the items alone (Capability Alignment, §1 and §8), so every health
report states the population it was computed on: which models, which were left out and
why, and the distribution of their abilities. A ``Population`` is the rule; it is parsed
from the command line's ``--population`` text:

* ``all``: every model with at least one response;
* ``top:K``: the K models with the highest S, a model's mean score over its responses
  (theta_m, Capability Alignment eq. 1); ties within 1e-9 are broken by model order;
* ``models:a,b,c``: the named models;
* ``family:NAME``: the models of one registered family (one generation, e.g. Qwen2.5);
* ``before:YYYY-MM-DD`` / ``after:YYYY-MM-DD``: the models whose date (release or first
  evaluation) is before the date, or on or after it, so that ``before:D`` and ``after:D``
  split the dated models in two (the contamination probe of Capability Alignment §8).
  Models without a date are left out and counted.

A model without any response is never part of a population: it contributes nothing, and
counting it would overstate the number of models.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from bank.health.responses import BoolArray, FloatArray, Responses

TIE_TOLERANCE = 1e-9
"""Scores closer than this are tied (so that floating-point noise cannot order them)."""
MAX_TEXT = 100_000
"""The longest ``--population`` text accepted."""
MAX_TOP = 1_000_000
"""The largest K accepted in ``top:K``."""
MAX_NAME = 400
"""The longest model or family name accepted."""

_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
_COUNT = re.compile(r"[0-9]{1,12}", re.ASCII)


class PopulationKind(StrEnum):
    """How a population picks its models."""

    ALL = "all"
    TOP = "top"
    NAMED = "named"
    FAMILY = "family"
    BEFORE = "before"
    AFTER = "after"


_PREFIX = {
    PopulationKind.ALL: "all",
    PopulationKind.TOP: "top",
    PopulationKind.NAMED: "models",
    PopulationKind.FAMILY: "family",
    PopulationKind.BEFORE: "before",
    PopulationKind.AFTER: "after",
}
_KIND_OF_PREFIX = {prefix: kind for kind, prefix in _PREFIX.items()}


@dataclass(frozen=True, slots=True)
class Population:
    """A rule that picks the models of a health result.

    Only the field of its kind is set: ``top`` for TOP, ``names`` for NAMED, ``family`` for
    FAMILY, ``date`` for BEFORE and AFTER. Construction checks this (``ValueError``).
    """

    kind: PopulationKind = PopulationKind.ALL
    top: int | None = None
    names: tuple[str, ...] = ()
    family: str | None = None
    date: dt.date | None = None

    def __post_init__(self) -> None:
        kind = PopulationKind(self.kind)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "names", tuple(self.names))
        dated = kind in (PopulationKind.BEFORE, PopulationKind.AFTER)
        if kind is PopulationKind.TOP:
            if isinstance(self.top, bool) or not isinstance(self.top, int):
                raise ValueError("a 'top' population needs a whole number top")
            if not 1 <= self.top <= MAX_TOP:
                raise ValueError(f"top must be from 1 to {MAX_TOP}, not {self.top}")
        elif self.top is not None:
            raise ValueError(f"a '{kind}' population has no top")
        if (kind is PopulationKind.NAMED) != bool(self.names):
            raise ValueError(
                f"a '{kind}' population {'needs' if self.names == () else 'has no'} names"
            )
        if (kind is PopulationKind.FAMILY) != bool(self.family):
            raise ValueError(
                f"a '{kind}' population {'needs' if not self.family else 'has no'} family"
            )
        if dated != (self.date is not None):
            raise ValueError(f"a '{kind}' population {'needs' if dated else 'has no'} date")
        if len(set(self.names)) != len(self.names):
            raise ValueError("a model is named twice")

    @property
    def text(self) -> str:
        """The ``--population`` text that parses back to this population."""
        prefix = _PREFIX[self.kind]
        if self.kind is PopulationKind.TOP:
            return f"{prefix}:{self.top}"
        if self.kind is PopulationKind.NAMED:
            return f"{prefix}:{','.join(self.names)}"
        if self.kind is PopulationKind.FAMILY:
            return f"{prefix}:{self.family}"
        if self.date is not None:
            return f"{prefix}:{self.date.isoformat()}"
        return prefix

    def parameters(self) -> dict[str, Any]:
        """The kind's parameters, JSON-ready."""
        if self.kind is PopulationKind.TOP:
            return {"top": self.top, "ranked_by": "mean score S", "ties": "model order"}
        if self.kind is PopulationKind.NAMED:
            return {"names": list(self.names)}
        if self.kind is PopulationKind.FAMILY:
            return {"family": self.family}
        if self.date is not None:
            relation = "<" if self.kind is PopulationKind.BEFORE else ">="
            return {"date": self.date.isoformat(), "rule": f"model date {relation} date"}
        return {}


def parse_population(text: str) -> Population:
    """The population of a ``--population`` value (see the module docstring).

    The kind is case-insensitive; names and families are kept as given (surrounding
    blanks removed). Raises ``ValueError`` with the reason for anything else: empty or
    overlong text, control characters, an unknown kind, a missing or extra argument,
    ``top:`` with anything but a whole number from 1 to ``MAX_TOP``, an empty, overlong or
    repeated name, or a date that is not a real ``YYYY-MM-DD`` day.
    """
    if not isinstance(text, str):
        raise ValueError("the population must be text")
    if len(text) > MAX_TEXT:
        raise ValueError(f"the population text is longer than {MAX_TEXT} characters")
    if any(not ch.isprintable() for ch in text):
        raise ValueError("the population text contains a control character")
    stripped = text.strip()
    if not stripped:
        raise ValueError(
            "the population is empty; use all, top:K, models:a,b, family:F, "
            "before:YYYY-MM-DD or after:YYYY-MM-DD"
        )
    prefix, colon, argument = stripped.partition(":")
    kind = _KIND_OF_PREFIX.get(prefix.strip().lower())
    if kind is None:
        shown = prefix[:40] + ("…" if len(prefix) > 40 else "")
        raise ValueError(
            f"unknown population kind {shown!r}; use one of " + ", ".join(_PREFIX.values())
        )
    argument = argument.strip()
    if kind is PopulationKind.ALL:
        if colon:
            raise ValueError("'all' takes no argument")
        return Population()
    if not argument:
        raise ValueError(f"'{_PREFIX[kind]}' needs an argument after ':'")
    if kind is PopulationKind.TOP:
        return Population(PopulationKind.TOP, top=_parse_top(argument))
    if kind is PopulationKind.NAMED:
        return Population(PopulationKind.NAMED, names=_parse_names(argument))
    if kind is PopulationKind.FAMILY:
        return Population(PopulationKind.FAMILY, family=_checked_name(argument, "family"))
    return Population(kind, date=_parse_date(argument))


def _parse_top(argument: str) -> int:
    if not _COUNT.fullmatch(argument):
        raise ValueError(f"top:K needs a whole number K from 1 to {MAX_TOP}, not {argument[:40]!r}")
    k = int(argument)
    if not 1 <= k <= MAX_TOP:
        raise ValueError(f"top:K needs K from 1 to {MAX_TOP}, not {k}")
    return k


def _parse_names(argument: str) -> tuple[str, ...]:
    names = tuple(_checked_name(part.strip(), "model name") for part in argument.split(","))
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"model {name[:40]!r} is named twice")
        seen.add(name)
    return names


def _checked_name(name: str, what: str) -> str:
    if not name:
        raise ValueError(f"an empty {what}")
    if len(name) > MAX_NAME:
        raise ValueError(f"a {what} longer than {MAX_NAME} characters")
    return name


def _parse_date(argument: str) -> dt.date:
    if not _DATE.fullmatch(argument):
        raise ValueError(f"a date must be YYYY-MM-DD, not {argument[:40]!r}")
    try:
        return dt.date.fromisoformat(argument)
    except ValueError:
        raise ValueError(f"{argument!r} is not a calendar date") from None


def top_k_mask(values: FloatArray, k: int) -> BoolArray:
    """The ``k`` largest finite values (all of them if fewer).

    Values within ``TIE_TOLERANCE`` of the k-th are tied; a tie at the cut is broken by
    position (lower index first), so exactly ``min(k, #finite)`` entries are kept. NaN is
    never kept. Vectorised (one sort).
    """
    values = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(values)
    keep = min(max(int(k), 0), int(finite.sum()))
    mask = np.zeros(values.shape, dtype=bool)
    if keep == 0:
        return mask
    order = np.lexsort((np.arange(values.size), -np.where(finite, values, -np.inf)))
    cut = values[order[keep - 1]]
    mask[finite & (values > cut + TIE_TOLERANCE)] = True
    tied = np.flatnonzero(finite & (np.abs(values - cut) <= TIE_TOLERANCE))
    mask[tied[: keep - int(mask.sum())]] = True
    return mask


def _check_known(responses: Responses, population: Population) -> None:
    """Raise ``ValueError`` when the population names a model or family not in ``responses``."""
    if population.kind is PopulationKind.NAMED:
        known = {m.name for m in responses.models}
        unknown = [name for name in population.names if name not in known]
        if unknown:
            shown = ", ".join(repr(name[:40]) for name in unknown[:5])
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            raise ValueError(f"no such model in the responses: {shown}{more}")
    if population.kind is PopulationKind.FAMILY and not any(
        m.family == population.family for m in responses.models
    ):
        families = sorted({m.family for m in responses.models if m.family is not None})
        raise ValueError(
            f"no model of family {population.family!r}; families: "
            + (", ".join(families[:20]) or "none")
        )


def _reasons(responses: Responses, population: Population) -> list[str | None]:
    """Per model, why the population leaves it out (None: it is in)."""
    _check_known(responses, population)
    answered = responses.responses_per_model() > 0
    reasons: list[str | None] = [None if seen else "no responses" for seen in answered]
    kind = population.kind
    named = set(population.names)
    for index, info in enumerate(responses.models):
        if reasons[index] is not None:
            continue
        if kind is PopulationKind.NAMED and info.name not in named:
            reasons[index] = "not named"
        elif kind is PopulationKind.FAMILY and info.family != population.family:
            reasons[index] = "no family" if info.family is None else "other family"
        elif kind in (PopulationKind.BEFORE, PopulationKind.AFTER):
            reasons[index] = _date_reason(info.date, population)
    if kind is PopulationKind.TOP and population.top is not None:
        scores = responses.abilities()
        top = top_k_mask(scores, population.top)
        for index in np.flatnonzero(~top & np.isfinite(scores)).tolist():
            reasons[index] = f"outside the top {population.top}"
    return reasons


def _date_reason(date: dt.date | None, population: Population) -> str | None:
    if date is None:
        return "no date"
    assert population.date is not None
    if population.kind is PopulationKind.BEFORE:
        return None if date < population.date else "dated on or after"
    return None if date >= population.date else "dated before"


def select_models(responses: Responses, population: Population) -> BoolArray:
    """Per model of ``responses``, whether it is in the population.

    Raises ``ValueError`` when the population names a model or a family that the
    responses do not have (a typo should not give an empty report). An empty selection
    from a date rule is not an error.
    """
    return np.array([reason is None for reason in _reasons(responses, population)], dtype=bool)


def describe(population: Population, responses: Responses, mask: BoolArray) -> dict[str, Any]:
    """The population statement every report carries, JSON-ready.

    Keys: ``kind``, ``text`` (the ``--population`` value), ``parameters``, ``n_models``,
    ``n_models_total``, ``models`` (the selected names, in model order), ``excluded``
    (reason -> count, over the models not in ``mask``) and ``abilities``: the mean,
    population SD (ddof=0), min and max of theta_m (a model's mean score over its
    responses, Capability Alignment eq. 1) over the selected models, with their count;
    None where there is no model.
    """
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (responses.n_models,):
        raise ValueError(f"the mask has shape {mask.shape}, not ({responses.n_models},)")
    reasons = _reasons(responses, population)
    excluded: dict[str, int] = {}
    for index in np.flatnonzero(~mask).tolist():
        reason = reasons[index] or "not selected"
        excluded[reason] = excluded.get(reason, 0) + 1
    theta = responses.abilities()[mask]
    return {
        "kind": str(population.kind),
        "text": population.text,
        "parameters": population.parameters(),
        "n_models": int(mask.sum()),
        "n_models_total": responses.n_models,
        "models": [responses.models[i].name for i in np.flatnonzero(mask)],
        "excluded": dict(sorted(excluded.items())),
        "abilities": _summary(theta),
    }


def _summary(theta: FloatArray) -> dict[str, float | int | None]:
    finite = theta[np.isfinite(theta)]
    if finite.size == 0:
        return {"n": 0, "mean": None, "sd": None, "min": None, "max": None}
    values = (finite.mean(), finite.std(ddof=0), finite.min(), finite.max())
    mean, sd, low, high = (float(v) if math.isfinite(v) else None for v in values)
    return {"n": int(finite.size), "mean": mean, "sd": sd, "min": low, "max": high}
