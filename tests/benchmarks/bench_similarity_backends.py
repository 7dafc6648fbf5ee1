"""Benchmark: the cascade's similarity filter, lexical versus embedding, on GAOKAO-Bench.

Run (not collected by pytest; needs ``pip install -e '.[embed]'`` for the embedding rows)::

    cd /work/main && . .venv/bin/activate
    python tests/benchmarks/bench_similarity_backends.py [--max-items N] [--target 0.98]
        [--direct-judge] [--json PATH]

The issue's question: on GAOKAO-Bench's open-ended (subjective) items, how many answers
does each backend decide without the LLM judge, and how often does that decision agree
with the judge? Keep the lexical default unless the embedding wins.

*Items*: every item of ``gaokao_bench/Subjective_Questions/*.json`` (1,030; the shared
data README calls them the open-ended ones) with a non-empty reference. Files of
fill-in-the-blank, dictation, cloze and error correction are the *short-reference* group
(the cascade's semi-objective types, the ones it really sends to the filter); the others
are the *open* group.

*Answers*: the data has no model answers, so each item gets constructed candidates (the
kind names say what they are; "intended" is the label the construction implies, used as a
second reference where it is defined):

=============== ============================================================== =========
kind            text                                                           intended
=============== ============================================================== =========
reference       the reference verbatim                                         correct
explained       ``答案：`` + reference + the item's ``analysis``                 correct
reordered       the reference's clauses (split at ；;。、 and newlines) reversed  correct
first_half      the first half of the reference's characters                   --
analysis        the item's ``analysis`` alone                                  --
same_subject    the reference of another item of the same file                 wrong
other_subject   the reference of an item of another file                       wrong
=============== ============================================================== =========

A kind is skipped for an item when its text would be empty or equal to the reference.

*Reference decision*: the stand-in judge (``fakellm``'s ``judge`` profile, no noise)
grading every candidate through ``judge.llm_judge.LlmJudge`` over HTTP against the local
fake provider (``tests.support.fake_llm.running_fake_llm``); ``--direct-judge`` calls its
grading function ``fakellm.behaviour.grade`` instead (same verdicts, no HTTP). That judge
rates 3 exactly when the normalised reference is contained in the normalised answer, else
0: a *containment* judge. It rejects reordered answers that a real grader would accept, so
agreement with it favours literal matching; the "intended" columns show the other side.

*Split*: items go to the calibration or the evaluation half by a hash of (file, index).
On the calibration half each backend's thresholds are calibrated against the judge:
``match_at`` is the lowest score s such that at least ``--target`` of the calibration
answers scoring >= s are rated 3 (the largest auto-matched set at that agreement), and
``mismatch_below`` the highest t <= match_at such that at least ``--target`` of those
scoring < t are rated 0; a side that reaches the target nowhere decides nothing. Each
threshold lies midway between the last accepted score and the next one (to 0.001); they
are evaluated on the other half, together with the lexical default (0.85 / 0.15) and the embedding
constants shipped in ``judge.embedding``.

*Figures* (evaluation half, per configuration): answers decided without the judge (count,
share), agreement of those decisions with the judge (match = 3, mismatch = 0), agreement
with the intended label where defined, by group and by kind; time per answer of
``SimilarityFilter.decide`` (one answer at a time, as the cascade calls it, the embedding
cache warm only for the reference just seen) and the model's load time.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from clients.llm.chat import ChatClient, ChatEndpoint
from judge.llm_judge import LlmJudge, MemoryJudgeCache
from judge.prompts import JudgeInput
from judge.similarity import LexicalBackend, SimilarityBackend, SimilarityFilter
from tests.support.paths import SHARED_DATA

SHORT_REFERENCE_FILES = ("Fill-in-the-Blank", "Dictation", "Cloze", "Error_Correction")
INTENDED = {
    "reference": True,
    "explained": True,
    "reordered": True,
    "first_half": None,
    "analysis": None,
    "same_subject": False,
    "other_subject": False,
}
KINDS = tuple(INTENDED)
LEXICAL_DEFAULT = (0.85, 0.15)
_CLAUSE_BREAK = re.compile(r"[；;。、\n]+")


# --------------------------------------------------------------------------- #
# Items and candidate answers
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Item:
    source: str
    index: int
    question: str
    reference: str
    analysis: str
    language: str
    group: str  # "short-reference" or "open"
    calibration: bool


@dataclass(frozen=True)
class Candidate:
    item: Item
    kind: str
    answer: str

    @property
    def intended(self) -> bool | None:
        return INTENDED[self.kind]


def _uniform(*parts: object) -> float:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def load_items(folder: Path, max_items: int | None) -> list[Item]:
    items = []
    for path in sorted(folder.glob("*.json")):
        short = any(marker in path.name for marker in SHORT_REFERENCE_FILES)
        language = "en" if "English" in path.name else "zh"
        for raw in json.loads(path.read_text(encoding="utf-8"))["example"]:
            reference = str(raw.get("answer") or "").strip()
            if not reference:
                continue
            items.append(
                Item(
                    source=path.stem,
                    index=int(raw["index"]),
                    question=str(raw["question"]),
                    reference=reference,
                    analysis=str(raw.get("analysis") or "").strip(),
                    language=language,
                    group="short-reference" if short else "open",
                    calibration=_uniform("split", path.stem, raw["index"]) < 0.5,
                )
            )
    if max_items is not None and max_items < len(items):
        items = sorted(items, key=lambda it: _uniform("subset", it.source, it.index))[:max_items]
    return items


def reordered(reference: str) -> str:
    clauses = [c.strip() for c in _CLAUSE_BREAK.split(reference) if c.strip()]
    return "；".join(reversed(clauses)) if len(clauses) > 1 else reference


def candidates_for(
    item: Item, by_source: dict[str, list[Item]], sources: list[str]
) -> list[Candidate]:
    ref = item.reference
    same = by_source[item.source]
    other_sources = [s for s in sources if s != item.source]
    other_source = other_sources[
        int(_uniform("other", item.source, item.index) * len(other_sources))
    ]
    texts = {
        "reference": ref,
        "explained": f"答案：{ref}\n{item.analysis}" if item.analysis else "",
        "reordered": reordered(ref),
        "first_half": ref[: len(ref) // 2] if len(ref) >= 4 else "",
        "analysis": item.analysis,
        "same_subject": _pick(same, item, "same").reference if len(same) > 1 else "",
        "other_subject": _pick(by_source[other_source], item, "far").reference,
    }
    kept = []
    for kind in KINDS:
        text = texts[kind]
        if text and (kind == "reference" or text != ref):
            kept.append(Candidate(item, kind, text))
    return kept


def _pick(pool: list[Item], item: Item, salt: str) -> Item:
    others = [it for it in pool if it is not item]
    return others[int(_uniform(salt, item.source, item.index) * len(others))]


def build_candidates(items: list[Item]) -> list[Candidate]:
    by_source: dict[str, list[Item]] = {}
    for item in items:
        by_source.setdefault(item.source, []).append(item)
    sources = sorted(by_source)
    return [c for item in items for c in candidates_for(item, by_source, sources)]


# --------------------------------------------------------------------------- #
# The judge's verdicts (the reference decision)
# --------------------------------------------------------------------------- #


def judge_inputs(candidates: Sequence[Candidate]) -> list[JudgeInput]:
    return [
        JudgeInput(
            question=c.item.question,
            answer=c.answer,
            reference=c.item.reference,
            language=c.item.language,
        )
        for c in candidates
    ]


async def _grade_over_http(inputs: list[JudgeInput], base_url: str) -> list[int | None]:
    client = ChatClient(ChatEndpoint(base_url=base_url, model="judge"), concurrency=16)
    judge = LlmJudge(name="judge-v1", client=client, cache=MemoryJudgeCache())
    try:
        outcomes = await asyncio.gather(*(judge.grade(x) for x in inputs))
    finally:
        await client.aclose()
    return [o.rating for o in outcomes]


def judge_ratings(candidates: Sequence[Candidate], direct: bool) -> list[int | None]:
    inputs = judge_inputs(candidates)
    if direct:
        from fakellm.behaviour import grade

        return [grade(x) for x in inputs]
    from tests.support.fake_llm import running_fake_llm

    with running_fake_llm() as server:
        return asyncio.run(_grade_over_http(inputs, server.base_url))


# --------------------------------------------------------------------------- #
# Scoring through the filter
# --------------------------------------------------------------------------- #


@dataclass
class Recording:
    """A backend that records the scores the filter asked for."""

    inner: SimilarityBackend
    scores: list[float] = field(default_factory=list)

    def similarity(self, a: str, b: str) -> float:
        score = self.inner.similarity(a, b)
        self.scores.append(score)
        return score


def score_all(
    backend: SimilarityBackend, candidates: Sequence[Candidate]
) -> tuple[NDArray[np.float64], float]:
    """(the scores ``SimilarityFilter.decide`` computed, seconds per answer)."""
    recording = Recording(backend)
    sieve = SimilarityFilter(match_at=0.99, mismatch_below=0.01, backend=recording)
    start = time.perf_counter()
    for c in candidates:
        sieve.decide(c.answer, c.item.reference)
    elapsed = time.perf_counter() - start
    return np.asarray(recording.scores, dtype=np.float64), elapsed / max(1, len(candidates))


# --------------------------------------------------------------------------- #
# Calibration and figures (pure)
# --------------------------------------------------------------------------- #


def calibrate(
    scores: NDArray[np.float64], correct: NDArray[np.bool_], target: float
) -> tuple[float | None, float | None]:
    """(match_at, mismatch_below) by the rule of the module docstring (None: never).

    Each threshold lies midway between the last score of the accepted run and the next
    distinct score, rounded to 0.001 (a threshold equal to an observed score would
    depend on float rounding: an answer identical to its reference scores 1 - 1e-16).
    """
    match_at = _upper_threshold(scores, correct, target)
    limit = match_at if match_at is not None else np.inf
    mismatch_below = _lower_threshold(scores, ~correct, target, limit)
    return match_at, mismatch_below


def _upper_threshold(
    scores: NDArray[np.float64], positive: NDArray[np.bool_], target: float
) -> float | None:
    """Lowest threshold whose set ``scores >= t`` holds >= ``target`` positives."""
    order = np.argsort(-scores, kind="stable")
    s = scores[order]
    precision = np.cumsum(positive[order]) / np.arange(1, len(s) + 1)
    below = np.append(s[1:], -np.inf)  # the next lower score
    ok = np.flatnonzero((s > below) & (precision >= target))
    if not ok.size:
        return None
    k = ok[-1]
    return round(float(s[k] + below[k]) / 2, 3) if np.isfinite(below[k]) else float(s[k])


def _lower_threshold(
    scores: NDArray[np.float64], negative: NDArray[np.bool_], target: float, limit: float
) -> float | None:
    """Highest threshold t <= ``limit`` whose set ``scores < t`` holds >= ``target``
    negatives."""
    order = np.argsort(scores, kind="stable")
    s = scores[order]
    precision = np.cumsum(negative[order]) / np.arange(1, len(s) + 1)
    above = np.append(s[1:], np.inf)  # the next higher score
    midpoint = np.where(np.isfinite(above), (s + above) / 2, np.nextafter(s, np.inf))
    ok = np.flatnonzero((s < above) & (precision >= target) & (midpoint <= limit))
    if not ok.size:
        return None
    return min(round(float(midpoint[ok[-1]]), 3), limit)


def decisions(
    scores: NDArray[np.float64], match_at: float | None, mismatch_below: float | None
) -> NDArray[np.int8]:
    """+1 match, -1 mismatch, 0 ask the judge (the filter's rule)."""
    out = np.zeros(len(scores), dtype=np.int8)
    if mismatch_below is not None:
        out[scores < mismatch_below] = -1
    if match_at is not None:
        out[scores >= match_at] = 1
    return out


@dataclass
class Figures:
    answers: int
    decided: int
    agree_judge: int
    intended_defined: int
    agree_intended: int

    @property
    def decided_share(self) -> float:
        return self.decided / self.answers if self.answers else float("nan")

    @property
    def judge_agreement(self) -> float:
        return self.agree_judge / self.decided if self.decided else float("nan")

    @property
    def intended_agreement(self) -> float:
        return (
            self.agree_intended / self.intended_defined if self.intended_defined else float("nan")
        )


def figures(
    decided: NDArray[np.int8], judge_correct: NDArray[np.bool_], intended: Sequence[bool | None]
) -> Figures:
    said_correct = decided == 1
    made = decided != 0
    defined = np.array([x is not None for x in intended], dtype=bool)
    intended_correct = np.array([bool(x) for x in intended], dtype=bool)
    return Figures(
        answers=len(decided),
        decided=int(made.sum()),
        agree_judge=int((made & (said_correct == judge_correct)).sum()),
        intended_defined=int((made & defined).sum()),
        agree_intended=int((made & defined & (said_correct == intended_correct)).sum()),
    )


# --------------------------------------------------------------------------- #
# Main
# --------------------------------------------------------------------------- #


@dataclass
class Config:
    name: str
    short: str
    backend: str
    match_at: float | None
    mismatch_below: float | None

    def decide(self, scores: NDArray[np.float64]) -> NDArray[np.int8]:
        return decisions(scores, self.match_at, self.mismatch_below)


def _fmt_threshold(value: float | None) -> str:
    return "never" if value is None else f"{value:.3f}"


def _pct(x: float) -> str:
    return "  n/a" if x != x else f"{100 * x:5.1f}%"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    default_data = SHARED_DATA / "gaokao_bench" / "Subjective_Questions"
    parser.add_argument("--data", type=Path, default=default_data)
    parser.add_argument("--max-items", type=int, default=None, help="a hashed subset of the items")
    parser.add_argument("--target", type=float, default=0.98, help="agreement per side")
    parser.add_argument("--direct-judge", action="store_true", help="fakellm's grade(), no HTTP")
    parser.add_argument("--exclude-kinds", default="", help="comma-separated kinds to leave out")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    return parser.parse_args(argv)


def load_backends() -> tuple[
    dict[str, Callable[[], SimilarityBackend]], dict[str, tuple[float, float]]
]:
    """The backends to compare (the embedding one when its extra is installed) and the
    thresholds ``judge.embedding`` ships for it."""
    makers: dict[str, Callable[[], SimilarityBackend]] = {"lexical": LexicalBackend}
    from judge.embedding import (
        CALIBRATED_MATCH_AT,
        CALIBRATED_MISMATCH_BELOW,
        EmbeddingBackend,
        EmbeddingBackendUnavailable,
    )

    try:
        EmbeddingBackend()
    except EmbeddingBackendUnavailable as error:
        print(f"  ! no embedding rows: {error}")
        return makers, {}
    makers["embedding"] = EmbeddingBackend
    return makers, {"embedding": (CALIBRATED_MATCH_AT, CALIBRATED_MISMATCH_BELOW)}


def select_candidates(args: argparse.Namespace) -> tuple[list[Item], list[Candidate]]:
    items = load_items(args.data, args.max_items)
    excluded = {kind for kind in args.exclude_kinds.split(",") if kind}
    if excluded - set(KINDS):
        raise SystemExit(f"unknown kinds {sorted(excluded - set(KINDS))}; kinds: {KINDS}")
    candidates = [c for c in build_candidates(items) if c.kind not in excluded]
    calibration = sum(c.item.calibration for c in candidates)
    print(
        f"{len(items)} items ({sum(it.calibration for it in items)} calibration), "
        f"{len(candidates)} candidate answers ({calibration} calibration)"
        + (f", without {sorted(excluded)}" if excluded else "")
    )
    return items, candidates


def judge_correct_of(candidates: list[Candidate], direct: bool) -> NDArray[np.bool_]:
    start = time.perf_counter()
    ratings = judge_ratings(candidates, direct)
    via = "fakellm.behaviour.grade" if direct else "LlmJudge over HTTP (fake provider)"
    seen = sorted(set(map(str, ratings)))
    print(f"judge: {via}, {time.perf_counter() - start:.1f} s; ratings {seen}")
    unrated = sum(r is None for r in ratings)
    if unrated:
        print(f"  ! {unrated} answers without a rating: counted as disagreeing with any decision")
    return np.array([r == 3 for r in ratings], dtype=bool)


def score_backends(
    candidates: list[Candidate],
) -> tuple[
    dict[str, NDArray[np.float64]], dict[str, dict[str, float]], dict[str, tuple[float, float]]
]:
    makers, shipped = load_backends()
    scores: dict[str, NDArray[np.float64]] = {}
    timing: dict[str, dict[str, float]] = {}
    for name, make in makers.items():
        start = time.perf_counter()
        backend = make()
        load_s = time.perf_counter() - start
        scores[name], per_answer = score_all(backend, candidates)
        timing[name] = {"load_s": load_s, "ms_per_answer": 1000 * per_answer}
        print(f"{name}: load {load_s:.2f} s, {1000 * per_answer:.2f} ms per answer (filter.decide)")
    return scores, timing, shipped


def check_lexical_default(candidates: list[Candidate], scores: NDArray[np.float64]) -> None:
    """The decisions derived from recorded scores are the filter's own (lexical default)."""
    sieve = SimilarityFilter()
    derived = decisions(scores, *LEXICAL_DEFAULT)
    code = {"match": 1, "mismatch": -1, "ambiguous": 0}
    own = np.array([code[sieve.decide(c.answer, c.item.reference)] for c in candidates])
    if not np.array_equal(own, derived):
        raise SystemExit(f"derived decisions differ from the filter's on {(own != derived).sum()}")


def build_configs(
    scores: dict[str, NDArray[np.float64]],
    judge_correct: NDArray[np.bool_],
    calib: NDArray[np.bool_],
    target: float,
    shipped: dict[str, tuple[float, float]],
) -> list[Config]:
    configs = [Config("lexical default 0.85 / 0.15", "L-default", "lexical", *LEXICAL_DEFAULT)]
    for name, values in scores.items():
        match_at, mismatch_below = calibrate(values[calib], judge_correct[calib], target)
        thresholds = f"{_fmt_threshold(match_at)} / {_fmt_threshold(mismatch_below)}"
        short = f"{name[0].upper()}-calibrated"
        configs.append(
            Config(f"{name} calibrated {thresholds}", short, name, match_at, mismatch_below)
        )
        if name in shipped and shipped[name] != (match_at, mismatch_below):
            m, b = shipped[name]
            configs.append(
                Config(
                    f"{name} shipped {m:.3f} / {b:.3f}", f"{name[0].upper()}-shipped", name, m, b
                )
            )
    print(f"calibrated on the calibration half, agreement target {target:.2f} per side")
    return configs


def print_section(
    title: str,
    configs: list[Config],
    scores: dict[str, NDArray[np.float64]],
    judge_correct: NDArray[np.bool_],
    intended: list[bool | None],
    mask: NDArray[np.bool_],
) -> dict[str, dict[str, int]]:
    print(f"\n{title}")
    head = ("configuration", "answers", "decided", "share", "agree judge", "agree intended")
    print("  {:40s} {:>7s} {:>7s} {:>6s} {:>11s} {:>14s}".format(*head))
    kept = [x for x, m in zip(intended, mask, strict=True) if m]
    out = {}
    for cfg in configs:
        f = figures(cfg.decide(scores[cfg.backend][mask]), judge_correct[mask], kept)
        out[cfg.name] = asdict(f)
        print(f"  {cfg.name:40s} {f.answers:7d} {f.decided:7d} {_pct(f.decided_share):>6s}", end="")
        agree = _pct(f.intended_agreement)
        print(f" {_pct(f.judge_agreement):>11s} {agree:>7s} (n={f.intended_defined})")
    return out


def print_by_kind(
    configs: list[Config],
    scores: dict[str, NDArray[np.float64]],
    judge_correct: NDArray[np.bool_],
    kinds: NDArray[np.str_],
    evaluation: NDArray[np.bool_],
) -> None:
    print("\nby kind, evaluation half: decided share / agreement with the judge")
    print(
        f"  {'kind':14s} {'answers':>7s} {'rated 3':>7s}"
        + "".join(f"{c.short:>18s}" for c in configs)
    )
    for kind in KINDS:
        mask = (kinds == kind) & evaluation
        if not mask.any():
            continue
        cells = []
        for cfg in configs:
            f = figures(
                cfg.decide(scores[cfg.backend][mask]), judge_correct[mask], [None] * int(mask.sum())
            )
            cells.append(f"{_pct(f.decided_share)} / {_pct(f.judge_agreement)}")
        rated3 = _pct(float(judge_correct[mask].mean()))
        print(
            f"  {kind:14s} {int(mask.sum()):7d} {rated3:>7s}" + "".join(f"{c:>18s}" for c in cells)
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    items, candidates = select_candidates(args)
    judge_correct = judge_correct_of(candidates, args.direct_judge)
    scores, timing, shipped = score_backends(candidates)
    check_lexical_default(candidates, scores["lexical"])
    calib = np.array([c.item.calibration for c in candidates], dtype=bool)
    configs = build_configs(scores, judge_correct, calib, args.target, shipped)
    intended = [c.intended for c in candidates]
    groups = {c.item.group for c in candidates}
    sections = [("evaluation half, all answers", ~calib), ("calibration half, all answers", calib)]
    for group in sorted(groups):
        in_group = np.array([c.item.group == group for c in candidates])
        sections.append((f"evaluation half, {group} items", in_group & ~calib))
    report: dict[str, object] = {"items": len(items), "answers": len(candidates), "timing": timing}
    report["configs"] = [asdict(cfg) for cfg in configs]
    for title, mask in sections:
        report[title] = print_section(title, configs, scores, judge_correct, intended, mask)
    kinds = np.array([c.kind for c in candidates])
    print_by_kind(configs, scores, judge_correct, kinds, ~calib)
    print(f"\ntotal {time.perf_counter() - started:.1f} s")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
