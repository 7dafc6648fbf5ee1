"""Capability diagnostics of a model-by-dimension score matrix (ReLE §3.5, §5-6).

Three descriptive statistics of how uneven models are across capability dimensions
(formulas in docs/methods.md):

* :func:`anisotropy_index` (ReLE eq. 3): ``AI = 1 - mean r(d_a, d_b)``, the mean
  Pearson correlation, across models, over every unique pair of dimension columns.
* :func:`rank_stability_amplitude` (ReLE §3.5, §6.1): a model's rank under several
  weighting schemes; ``RSA = max rank - min rank``. :data:`RELE_SCHEMES` maps ReLE's three
  schemes onto the ten LLMEval-Fair disciplines.
* :func:`capability_inconsistency` (ReLE eq. 4-5): the coefficient of variation of a
  model's difficulty-adjusted dimension scores, with a smoothing floor under the mean.

ReLE's equations could not be recovered from its text; the formulas here follow the
paper's prose, and each function documents the exact
formula and every choice the text leaves open.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from numbers import Real

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

TIE_TOLERANCE = 1e-9
"""Scheme scores closer than ``TIE_TOLERANCE * max(1, max |score|)`` are ranked as tied, so
that models whose weighted means are equal in exact arithmetic (e.g. Baidu-3.5 and
ChatGLM-Pro in LLMEval-Fair (Zhang et al.) table 8) are not split by floating-point rounding."""


# --------------------------------------------------------------------------------------
# The score matrix
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class ScoreMatrix:
    """Scores of models (rows) on capability dimensions (columns).

    Attributes
    ----------
    models : tuple of str
        Row labels, unique and non-empty.
    dimensions : tuple of str
        Column labels, unique and non-empty.
    scores : ndarray of float, shape (n_models, n_dimensions)
        Finite scores; a read-only copy of what was given.
    """

    models: tuple[str, ...]
    dimensions: tuple[str, ...]
    scores: FloatArray = field(repr=False)

    def __init__(
        self,
        models: Sequence[str],
        dimensions: Sequence[str],
        scores: npt.ArrayLike,
    ) -> None:
        values = np.array(scores, dtype=np.float64)
        if values.ndim != 2 or values.shape != (len(models), len(dimensions)):
            raise ValueError(
                f"scores have shape {values.shape}, expected ({len(models)} models, "
                f"{len(dimensions)} dimensions)"
            )
        for kind, names in (("model", models), ("dimension", dimensions)):
            if not names:
                raise ValueError(f"a score matrix needs at least one {kind}")
            seen: set[str] = set()
            for name in names:
                if not name:
                    raise ValueError(f"a {kind} name is empty")
                if name in seen:
                    raise ValueError(f"{kind} {name!r} appears twice")
                seen.add(name)
        bad = np.argwhere(~np.isfinite(values))
        if len(bad):
            row, col = (int(i) for i in bad[0])
            raise ValueError(
                f"model {models[row]!r}, dimension {dimensions[col]!r}: score "
                f"{values[row, col]!r} is not a finite number"
            )
        values.setflags(write=False)
        object.__setattr__(self, "models", tuple(models))
        object.__setattr__(self, "dimensions", tuple(dimensions))
        object.__setattr__(self, "scores", values)

    def select(self, dimensions: Sequence[str]) -> ScoreMatrix:
        """The same models on ``dimensions`` only (in that order)."""
        missing = [d for d in dimensions if d not in self.dimensions]
        if missing:
            raise ValueError(
                f"unknown dimension {missing[0]!r} (dimensions: {', '.join(self.dimensions)})"
            )
        columns = [self.dimensions.index(d) for d in dimensions]
        return ScoreMatrix(self.models, tuple(dimensions), self.scores[:, columns])

    def mean_scores(self) -> dict[str, float]:
        """Model -> the unweighted mean of its dimension scores."""
        return dict(zip(self.models, (float(m) for m in self.scores.mean(axis=1)), strict=True))


# --------------------------------------------------------------------------------------
# Anisotropy index (ReLE eq. 3)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class AnisotropyResult:
    """The anisotropy index of a score matrix (see :func:`anisotropy_index`).

    Attributes
    ----------
    index : float
        ``1 - mean_correlation``; 0 when every pair of dimensions is perfectly positively
        correlated, up to 2 when all are perfectly anti-correlated. NaN when no pair has
        a defined correlation.
    mean_correlation : float
        The mean Pearson correlation over the ``n_pairs`` pairs with a defined
        correlation; NaN when there are none.
    n_pairs : int
        How many unique dimension pairs were averaged.
    undefined_pairs : tuple of (str, str)
        Pairs left out because one of the columns is constant across models (its Pearson
        correlation is 0/0).
    dimensions : tuple of str
        The dimensions, in the order of ``correlation``.
    correlation : ndarray, shape (n_dimensions, n_dimensions)
        The Pearson correlation matrix across models (``np.corrcoef`` of the columns);
        NaN in the rows and columns of constant dimensions, including their diagonal.
    """

    index: float
    mean_correlation: float
    n_pairs: int
    undefined_pairs: tuple[tuple[str, str], ...]
    dimensions: tuple[str, ...]
    correlation: FloatArray = field(repr=False)


def _pearson_matrix(values: FloatArray) -> FloatArray:
    """Pearson correlation of the columns of ``values``; NaN for constant columns."""
    spread = np.ptp(values, axis=0)
    constant = spread == 0
    # Scale each column to a range of 1 first (r is scale-free), so that the squares below
    # can neither underflow nor overflow; a non-constant column then has a norm >= 0.5.
    centred = (values - values.mean(axis=0)) / np.where(constant, 1.0, spread)
    norms = np.sqrt((centred**2).sum(axis=0))
    unit = centred / np.where(constant, 1.0, norms)
    corr = np.clip(unit.T @ unit, -1.0, 1.0)
    corr[constant, :] = np.nan
    corr[:, constant] = np.nan
    return np.asarray(corr, dtype=np.float64)


def anisotropy_index(
    matrix: ScoreMatrix, dimensions: Sequence[str] | None = None
) -> AnisotropyResult:
    """Anisotropy index: 1 minus the mean inter-dimension Pearson correlation.

    ReLE eq. 3 (§5.1). With ``D`` dimensions and ``v_j`` the
    vector of all models' scores on dimension ``j``:

    .. math:: AI = 1 - \\frac{2}{D(D-1)} \\sum_{a < b} r(v_a, v_b)

    where ``r`` is the Pearson correlation across models. A dimension whose scores are the
    same for every model has no defined correlation with anything (0/0); the pairs that
    involve it are left out of the mean and listed in ``undefined_pairs`` (``scipy.stats``
    would return NaN with a ``ConstantInputWarning``). If no pair is left, the index is
    NaN.

    Parameters
    ----------
    matrix : ScoreMatrix
        At least two models.
    dimensions : sequence of str, optional
        The dimensions to use (default: all of them); at least two.

    Returns
    -------
    AnisotropyResult

    Raises
    ------
    ValueError
        Fewer than two models or dimensions, or an unknown dimension.
    """
    if dimensions is not None:
        matrix = matrix.select(dimensions)
    n_models, n_dims = matrix.scores.shape
    if n_models < 2:
        raise ValueError(f"the anisotropy index needs at least two models, got {n_models}")
    if n_dims < 2:
        raise ValueError(f"the anisotropy index needs at least two dimensions, got {n_dims}")
    corr = _pearson_matrix(matrix.scores)
    corr.setflags(write=False)
    defined: list[float] = []
    undefined: list[tuple[str, str]] = []
    for a, b in combinations(range(n_dims), 2):
        value = float(corr[a, b])
        if math.isnan(value):
            undefined.append((matrix.dimensions[a], matrix.dimensions[b]))
        else:
            defined.append(value)
    mean = math.fsum(defined) / len(defined) if defined else math.nan
    return AnisotropyResult(
        index=1.0 - mean,
        mean_correlation=mean,
        n_pairs=len(defined),
        undefined_pairs=tuple(undefined),
        dimensions=matrix.dimensions,
        correlation=corr,
    )


# --------------------------------------------------------------------------------------
# Weighting schemes and Rank Stability Amplitude (ReLE §3.5, §6.1)
# --------------------------------------------------------------------------------------

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
    total = math.fsum(weights.values())
    return {d: weights[d] / total for d in LLMEVAL_FAIR_DISCIPLINES}


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


def restricted_scheme(weights: Mapping[str, float]) -> dict[str, float]:
    """``weights`` renormalised to sum to 1 (the scheme restricted to these dimensions)."""
    total = math.fsum(weights.values())
    return {name: weight / total for name, weight in weights.items()}


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
    a positive sum; they need not sum to 1 (:func:`rank_stability_amplitude` normalises them).

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


def competition_ranks(values: Sequence[float] | FloatArray) -> IntArray:
    """Ranks, 1 for the highest value, ties sharing the best ("1224") rank.

    ``rank_i = 1 + #{j : v_j > v_i + tol}`` with
    ``tol = TIE_TOLERANCE * max(1, max |v|)``: values within ``tol`` of each other tie
    (for exact values this is ``scipy.stats.rankdata(-v, method="min")``).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError(f"expected a 1-D sequence, got shape {v.shape}")
    if v.size == 0:
        return np.zeros(0, dtype=np.int64)
    tol = TIE_TOLERANCE * max(1.0, float(np.max(np.abs(v))))
    ordered = np.sort(v)
    above = v.size - np.searchsorted(ordered, v + tol, side="right")
    return np.asarray(above + 1, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class RankStability:
    """A model's ranks across weighting schemes (see :func:`rank_stability_amplitude`).

    Attributes
    ----------
    amplitude : int
        ``RSA = max rank - min rank`` over the schemes; 0 with a single scheme.
    ranks : dict of str to int
        Scheme -> the model's rank (1 = best).
    scores : dict of str to float
        Scheme -> the model's weighted mean score.
    """

    amplitude: int
    ranks: dict[str, int]
    scores: dict[str, float]


def rank_stability_amplitude(
    matrix: ScoreMatrix, schemes: Mapping[str, Mapping[str, float]]
) -> dict[str, RankStability]:
    """Rank Stability Amplitude of every model over weighting schemes.

    ReLE §3.5 and §6.1. Under scheme ``k`` with
    weights ``w_k`` a model's score is the weighted mean of its dimension scores,
    ``s_mk = sum_j w_kj x_mj / sum_j w_kj``; the models are ranked by it, rank 1 the best,
    with competition ranking for ties (tied models share the best of their ranks, as
    ``scipy.stats.rankdata(-s, method="min")``; scores within :data:`TIE_TOLERANCE` count
    as tied); and

    .. math:: RSA_m = \\max_k \\mathrm{rank}_{mk} - \\min_k \\mathrm{rank}_{mk}.

    Parameters
    ----------
    matrix : ScoreMatrix
    schemes : mapping of str to mapping of str to float
        Scheme -> dimension -> weight, checked by :func:`validate_schemes` (unknown
        dimensions, negative weights and all-zero schemes are errors; a dimension a scheme
        does not name weighs 0). :data:`RELE_SCHEMES` for the ten LLMEval-Fair disciplines.

    Returns
    -------
    dict of str to RankStability
        Model -> its RSA, ranks and scores, in the matrix's model order.

    Raises
    ------
    SchemeError
        Invalid schemes.
    """
    checked = validate_schemes(schemes, matrix.dimensions)
    ranks: dict[str, IntArray] = {}
    scores: dict[str, FloatArray] = {}
    for name, weights in checked.items():
        w = np.array([weights.get(d, 0.0) for d in matrix.dimensions], dtype=np.float64)
        scores[name] = matrix.scores @ (w / w.sum())
        ranks[name] = competition_ranks(scores[name])
    result: dict[str, RankStability] = {}
    for i, model in enumerate(matrix.models):
        model_ranks = {name: int(r[i]) for name, r in ranks.items()}
        result[model] = RankStability(
            amplitude=max(model_ranks.values()) - min(model_ranks.values()),
            ranks=model_ranks,
            scores={name: float(s[i]) for name, s in scores.items()},
        )
    return result


# --------------------------------------------------------------------------------------
# Capability inconsistency (ReLE §6.2, eq. 4-5)
# --------------------------------------------------------------------------------------

DEFAULT_DIFFICULTY_ANCHORS = 10
"""ReLE §6.2: a dimension's difficulty comes from "the average performance of top-10
anchor models"."""

DEFAULT_CI_FLOOR = 0.1
"""The smoothing floor under the mean difficulty-adjusted score (see
:func:`capability_inconsistency`)."""


@dataclass(frozen=True, slots=True, eq=False)
class CapabilityInconsistency:
    """Capability inconsistency of every model (see :func:`capability_inconsistency`).

    Attributes
    ----------
    values : dict of str to float
        Model -> ``CI = std(adjusted) / max(mean(adjusted), floor)``.
    difficulty : dict of str to float
        Dimension -> the difficulty parameter ``b_j`` its scores were divided by.
    anchors : tuple of str
        The models whose mean scores gave ``difficulty`` (empty when it was given).
    floor : float
        The smoothing floor ``epsilon``.
    floored : tuple of str
        Models whose mean adjusted score was below the floor (their CI used the floor).
    dimensions : tuple of str
        Column order of ``adjusted``.
    adjusted : ndarray, shape (n_models, n_dimensions)
        The difficulty-adjusted scores ``x_mj / b_j``.
    """

    values: dict[str, float]
    difficulty: dict[str, float]
    anchors: tuple[str, ...]
    floor: float
    floored: tuple[str, ...]
    dimensions: tuple[str, ...]
    adjusted: FloatArray = field(repr=False)


def difficulty_anchors(matrix: ScoreMatrix, count: int = DEFAULT_DIFFICULTY_ANCHORS) -> list[int]:
    """Row indices of the ``count`` models with the highest mean dimension score.

    Fewer when the matrix has fewer models; ties at the cut go to the earlier row.
    """
    if count < 1:
        raise ValueError(f"the number of difficulty anchors must be at least 1, got {count}")
    means = matrix.scores.mean(axis=1)
    order = sorted(range(len(means)), key=lambda i: (-means[i], i))
    return order[:count]


def capability_inconsistency(
    matrix: ScoreMatrix,
    *,
    difficulty: Mapping[str, float] | None = None,
    anchors: int = DEFAULT_DIFFICULTY_ANCHORS,
    floor: float = DEFAULT_CI_FLOOR,
) -> CapabilityInconsistency:
    """Capability inconsistency: the regularised coefficient of variation of a model's
    difficulty-adjusted dimension scores (ReLE §3.5, §6.2 eq. 4-5;
    docs/methods.md).

    1. Difficulty (ReLE §6.2): each dimension ``j`` has a difficulty parameter
       ``b_j``, by default the mean score on ``j`` of the ``anchors`` top models (the
       "top-10 anchor models"; the top models are those with the highest unweighted mean
       dimension score). With ``anchors`` at least the number of models, ``b_j`` is the
       dimension's mean across all models.
    2. Adjusted scores: ``x~_mj = x_mj / b_j``, 1 meaning "as good as the anchors".
    3. With ``mu_m`` and ``sigma_m`` the mean and the population standard deviation
       (``ddof=0``) of ``x~_m1 .. x~_mD``:

       .. math:: CI_m = \\frac{\\sigma_m}{\\max(\\mu_m, \\varepsilon)}

    The floor ``epsilon`` keeps CI bounded for models that score near zero everywhere
    (where the plain ratio explodes). Eq. 5 itself was lost in extraction; the paper calls
    ``epsilon`` a smoothing constant "derived from the theoretical minimum score of random
    guessing"; here it is a floor. A floor (rather than ``mu + epsilon``) leaves CI
    the exact coefficient of variation for every model above it. LLMEval-Fair items are
    open-ended and judged 0-3 (multiple-choice items are turned into fill-in-the-blank
    variants), so a random guesser scores about 0 and gives no usable constant; the
    default 0.1 means "a tenth of the anchors' level", below every model of LLMEval-Fair's
    table 8 (the weakest is at about 0.26).

    Parameters
    ----------
    matrix : ScoreMatrix
    difficulty : mapping of str to float, optional
        ``b_j`` per dimension, overriding the anchors' means; must cover every dimension.
    anchors : int, default 10
        How many top models define ``b_j`` when ``difficulty`` is not given.
    floor : float, default 0.1
        ``epsilon``, positive, in units of the adjusted scores.

    Returns
    -------
    CapabilityInconsistency

    Raises
    ------
    ValueError
        A non-positive or non-finite floor, fewer than one anchor, a ``difficulty`` that
        misses a dimension or names an unknown one, or a difficulty ``b_j`` that is not
        positive (named).
    """
    if not (math.isfinite(floor) and floor > 0):
        raise ValueError(f"the smoothing floor must be a positive number, got {floor!r}")
    b, anchor_names = _difficulty(matrix, difficulty, anchors)
    for dimension, value in zip(matrix.dimensions, b, strict=True):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(
                f"dimension {dimension!r}: difficulty {float(value):g} is not positive; "
                "difficulty-adjusted scores need a positive difficulty"
            )
    adjusted = matrix.scores / b
    adjusted.setflags(write=False)
    mu = adjusted.mean(axis=1)
    sigma = adjusted.std(axis=1, ddof=0)
    ci = sigma / np.maximum(mu, floor)
    return CapabilityInconsistency(
        values=dict(zip(matrix.models, (float(v) for v in ci), strict=True)),
        difficulty=dict(zip(matrix.dimensions, (float(v) for v in b), strict=True)),
        anchors=anchor_names,
        floor=float(floor),
        floored=tuple(m for m, v in zip(matrix.models, mu, strict=True) if v < floor),
        dimensions=matrix.dimensions,
        adjusted=adjusted,
    )


def _difficulty(
    matrix: ScoreMatrix, difficulty: Mapping[str, float] | None, anchors: int
) -> tuple[FloatArray, tuple[str, ...]]:
    """``b_j`` per dimension (given, or the anchors' mean scores) and the anchors' names.

    Raises ValueError for fewer than one anchor or a ``difficulty`` that misses a dimension
    or names an unknown one; ``b_j`` itself is not checked."""
    if difficulty is None:
        rows = difficulty_anchors(matrix, anchors)
        b = np.asarray(matrix.scores[rows].mean(axis=0), dtype=np.float64)
        return b, tuple(matrix.models[i] for i in rows)
    unknown = [d for d in difficulty if d not in matrix.dimensions]
    missing = [d for d in matrix.dimensions if d not in difficulty]
    if unknown:
        raise ValueError(f"difficulty names unknown dimension {unknown[0]!r}")
    if missing:
        raise ValueError(f"difficulty misses dimension {missing[0]!r}")
    return np.array([float(difficulty[d]) for d in matrix.dimensions], dtype=np.float64), ()


# --------------------------------------------------------------------------------------
# All three, never raising on degenerate data
# --------------------------------------------------------------------------------------

ANISOTROPY = "anisotropy_index"
RSA = "rsa"
INCONSISTENCY = "capability_inconsistency"
STATISTICS: tuple[str, ...] = (ANISOTROPY, RSA, INCONSISTENCY)
"""The names of the statistics of :class:`Diagnostics` (the keys of ``unavailable``)."""


@dataclass(frozen=True, slots=True, eq=False)
class Diagnostics:
    """The three diagnostics of a score table, each computed or unavailable with a reason
    (see :func:`diagnose`).

    Attributes
    ----------
    models : tuple of str
        The models the statistics are over: those with a finite score on every dimension,
        in the given order.
    dimensions : tuple of str
        The dimensions, in the given order.
    anisotropy : AnisotropyResult or None
        None when unavailable.
    rsa : dict of str to RankStability or None
        None when unavailable (e.g. no weighting scheme applies).
    inconsistency : CapabilityInconsistency or None
        None when unavailable.
    unavailable : dict of str to str
        Statistic name (:data:`STATISTICS`) -> a human-readable reason why it is None;
        empty when all three were computed.
    """

    models: tuple[str, ...]
    dimensions: tuple[str, ...]
    anisotropy: AnisotropyResult | None
    rsa: dict[str, RankStability] | None
    inconsistency: CapabilityInconsistency | None
    unavailable: dict[str, str]


def diagnose(
    models: Sequence[str],
    dimensions: Sequence[str],
    scores: npt.ArrayLike,
    *,
    schemes: Mapping[str, Mapping[str, float]] | None = None,
    label: str = "dimension",
) -> Diagnostics:
    """Anisotropy index, RSA and capability inconsistency of a score table, each either
    computed or None with a reason; degenerate data never raises.

    A statistic that cannot be computed is unavailable, with a reason naming the cause,
    e.g. "discipline 'Law': every model scores 0, so its difficulty is undefined". The
    cases:

    * Every statistic compares models across dimensions, so each needs at least two
      models and two dimensions. Models with a non-finite score (NaN, infinity) on some
      dimension are left out first, like models not scored on every dimension.
    * Anisotropy: no pair of dimensions has a defined correlation (at most one dimension
      varies across models; see :func:`anisotropy_index`).
    * RSA: no weighting scheme applies (``schemes`` None on dimensions outside the ten
      LLMEval-Fair disciplines, or fewer than two of them), or the schemes are invalid
      (:func:`validate_schemes`).
    * Capability inconsistency: a difficulty ``b_j`` (the anchors' mean score) is not
      positive, e.g. every model scores 0 on ``j`` (see :func:`capability_inconsistency`),
      or the adjusted scores overflow.

    Parameters
    ----------
    models, dimensions : sequence of str
        Row and column labels, unique and non-empty; either may be empty.
    scores : array_like, shape (n_models, n_dimensions)
        Any floats, NaN and infinity included.
    schemes : mapping of str to mapping of str to float, optional
        Weighting schemes of RSA; default :func:`rele_schemes_for` the dimensions (ReLE's,
        on LLMEval-Fair disciplines only), none otherwise.
    label : str, default "dimension"
        What the reasons call a dimension (e.g. "discipline").

    Returns
    -------
    Diagnostics

    Raises
    ------
    ValueError
        Only for malformed arguments: ``scores`` not of shape (models, dimensions), or an
        empty or repeated label.
    """
    table = np.array(scores, dtype=np.float64)
    if table.size == 0 and 0 in (len(models), len(dimensions)):
        table = table.reshape(len(models), len(dimensions))
    if table.shape != (len(models), len(dimensions)):
        raise ValueError(
            f"scores have shape {table.shape}, expected ({len(models)} models, "
            f"{len(dimensions)} dimensions)"
        )
    _check_labels(models, dimensions)
    finite = np.asarray(np.isfinite(table).all(axis=1), dtype=np.bool_)
    kept = tuple(m for m, ok in zip(models, finite.tolist(), strict=True) if ok)
    too_little = _too_little(kept, tuple(dimensions), label, len(models) - len(kept))
    if too_little is not None:
        reasons = dict.fromkeys(STATISTICS, too_little)
        return Diagnostics(kept, tuple(dimensions), None, None, None, reasons)
    matrix = ScoreMatrix(kept, dimensions, table[finite])
    if schemes is None:
        schemes = rele_schemes_for(matrix.dimensions)
    anisotropy, why_not_ai = _safe_anisotropy(matrix, label)
    rsa, why_not_rsa = _safe_rsa(matrix, schemes, label)
    inconsistency, why_not_ci = _safe_inconsistency(matrix, label)
    reasons = {
        name: reason
        for name, reason in zip(STATISTICS, (why_not_ai, why_not_rsa, why_not_ci), strict=True)
        if reason is not None
    }
    return Diagnostics(matrix.models, matrix.dimensions, anisotropy, rsa, inconsistency, reasons)


def _check_labels(models: Sequence[str], dimensions: Sequence[str]) -> None:
    for kind, names in (("model", models), ("dimension", dimensions)):
        if any(not name for name in names):
            raise ValueError(f"a {kind} name is empty")
        if len(set(names)) != len(names):
            raise ValueError(f"a {kind} name appears twice")


def _too_little(
    models: tuple[str, ...], dimensions: tuple[str, ...], label: str, dropped: int
) -> str | None:
    """Why no statistic can be computed on ``models`` x ``dimensions``, or None."""
    if len(dimensions) < 2:
        return f"needs at least two {label}s, got {len(dimensions)}"
    if len(models) < 2:
        left_out = (
            f"; {dropped} left out for a score that is not a finite number" if dropped else ""
        )
        return f"needs at least two models scored on every {label}, got {len(models)}{left_out}"
    return None


def _named(label: str, names: Sequence[str]) -> str:
    """``discipline 'Law'`` or ``disciplines 'Law', 'History'``."""
    return f"{label}{'s' if len(names) > 1 else ''} {', '.join(repr(n) for n in names)}"


def _safe_anisotropy(matrix: ScoreMatrix, label: str) -> tuple[AnisotropyResult | None, str | None]:
    with np.errstate(all="ignore"):
        result = anisotropy_index(matrix)
    if result.n_pairs and math.isfinite(result.index):
        return result, None
    constant = [
        d for d, s in zip(matrix.dimensions, np.ptp(matrix.scores, axis=0), strict=True) if s == 0
    ]
    if constant:
        return None, (
            f"every model scores the same on {_named(label, constant)}, so no pair of "
            f"{label}s has a defined correlation"
        )
    return None, f"no pair of {label}s has a defined correlation"


def _safe_rsa(
    matrix: ScoreMatrix, schemes: Mapping[str, Mapping[str, float]] | None, label: str
) -> tuple[dict[str, RankStability] | None, str | None]:
    if not schemes:
        return None, (
            f"no weighting schemes apply to these {label}s (ReLE's weigh the ten "
            "LLMEval-Fair disciplines, not others); give schemes of your own"
        )
    try:
        with np.errstate(all="ignore"):
            return rank_stability_amplitude(matrix, schemes), None
    except SchemeError as error:
        return None, "invalid weighting schemes: " + "; ".join(error.problems)


def _safe_inconsistency(
    matrix: ScoreMatrix, label: str
) -> tuple[CapabilityInconsistency | None, str | None]:
    b, anchors = _difficulty(matrix, None, DEFAULT_DIFFICULTY_ANCHORS)
    problems = [
        _difficulty_problem(f"{label} {dimension!r}", matrix.scores[:, j], value, len(anchors))
        for j, (dimension, value) in enumerate(zip(matrix.dimensions, b, strict=True))
        if not (math.isfinite(value) and value > 0)
    ]
    if problems:
        return None, "; ".join(problems)
    with np.errstate(all="ignore"):
        result = capability_inconsistency(matrix)
    if not all(math.isfinite(v) for v in result.values.values()):
        return None, "the difficulty-adjusted scores overflow"
    return result, None


def _difficulty_problem(where: str, column: FloatArray, value: float, n_anchors: int) -> str:
    """Why the difficulty ``value`` of the dimension with scores ``column`` is unusable."""
    if not column.any():
        return f"{where}: every model scores 0, so its difficulty is undefined"
    if value == 0:
        return (
            f"{where}: the {n_anchors} anchor models (the best overall) all score 0, so its "
            "difficulty is undefined"
        )
    if not math.isfinite(value):
        return f"{where}: the anchor models' mean score overflows"
    return f"{where}: difficulty {value:g} (the anchor models' mean score) is not positive"


__all__: list[str] = [
    "ANISOTROPY",
    "DEFAULT_CI_FLOOR",
    "DEFAULT_DIFFICULTY_ANCHORS",
    "INCONSISTENCY",
    "LLMEVAL_FAIR_DISCIPLINES",
    "RELE_DOMAIN_DISCIPLINES",
    "RELE_SCHEMES",
    "RSA",
    "STATISTICS",
    "TIE_TOLERANCE",
    "AnisotropyResult",
    "CapabilityInconsistency",
    "Diagnostics",
    "RankStability",
    "SchemeError",
    "ScoreMatrix",
    "anisotropy_index",
    "capability_inconsistency",
    "competition_ranks",
    "diagnose",
    "difficulty_anchors",
    "rank_stability_amplitude",
    "rele_schemes_for",
    "restricted_scheme",
    "validate_schemes",
]
