"""Tests for bank.duplicates: normalisation and content hashes (exact), shingles and MinHash
LSH (minhash), and the near duplicates of a batch at import (near)."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bank.duplicates.exact import content_hash, normalise_text
from bank.duplicates.minhash import (
    NEAR_DUPLICATE_JACCARD,
    MinHashLSH,
    candidate_pairs_within,
    jaccard,
    shingle_batch,
    shingles,
)
from bank.duplicates.near import LSH, BatchSketch, pairs_within

ZH_CHARS = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工"
_EN_VOCABULARY = (
    "which of the following is correct statement about energy cell function derivative "
    "integral equation value when given that river dynasty market price law force mass "
    "acceleration protein enzyme theorem prime number vector matrix poem author century"
)
EN_WORDS = _EN_VOCABULARY.split()

# ------------------------------------------------------------------ normalise


def test_normalise_folds_whitespace_case_and_full_width() -> None:
    assert normalise_text("  Ｈｅｌｌｏ,\t\n  ＷＯＲＬＤ！\u3000 ") == "hello, world!"
    assert normalise_text("下列说法正确的是（　　）") == "下列说法正确的是( )"
    assert normalise_text("Straße") == "strasse"
    assert normalise_text("") == ""


@given(st.text())
def test_normalise_is_idempotent(text: str) -> None:
    once = normalise_text(text)
    assert normalise_text(once) == once
    assert once == once.strip()
    assert "  " not in once


# --------------------------------------------------------------- content hash

QUESTION = "下列关于光合作用的说法，正确的是（  ）"
OPTIONS = ["Light reaction", "Dark reaction", "Both", "Neither"]


def test_content_hash_is_sha256_hex() -> None:
    digest = content_hash("multiple_choice", QUESTION, OPTIONS)
    assert len(digest) == 64
    int(digest, 16)


def test_content_hash_ignores_whitespace_case_and_full_width() -> None:
    base = content_hash("multiple_choice", QUESTION, OPTIONS)
    variant_question = "  下列关于光合作用的说法,正确的是(\u3000 )\n"
    variant_options = ["ＬＩＧＨＴ  reaction", " dark\treaction", "BOTH", "neither "]
    assert content_hash("multiple_choice", variant_question, variant_options) == base


@pytest.mark.parametrize(
    ("qtype", "question", "options"),
    [
        ("multiple_choice", QUESTION, ["Light reaction", "Dark reaction", "Both", "None"]),
        ("multiple_choice", QUESTION + "?", OPTIONS),
        ("multiple_choice", QUESTION, list(reversed(OPTIONS))),
        ("multiple_choice", QUESTION, OPTIONS[:3]),
        ("multiple_choice", QUESTION, None),
        ("multiple_choice", QUESTION, []),
        ("true_false", QUESTION, OPTIONS),
        ("multiple_choice", QUESTION, ["Light", "reaction", "Dark reaction", "Both", "Neither"]),
    ],
)
def test_content_hash_differs_on_any_other_change(
    qtype: str, question: str, options: list[str] | None
) -> None:
    assert content_hash(qtype, question, options) != content_hash(
        "multiple_choice", QUESTION, OPTIONS
    )


def test_content_hash_encoding_is_unambiguous() -> None:
    assert content_hash("fill_in", "q", ["ab", "c"]) != content_hash("fill_in", "q", ["a", "bc"])
    assert content_hash("fill_in", "a", ["b"]) != content_hash("fill_in", 'a","b', [])
    assert content_hash("fill_in", "q", None) != content_hash("fill_in", "q", [])


# -------------------------------------------------------------------- shingles


def test_shingles_are_distinct_64_bit_kgrams_ignoring_spaces() -> None:
    result = shingles("abcdefg")
    assert len(result) == 3  # abcde, bcdef, cdefg
    assert all(0 <= h < 2**64 for h in result)
    assert shingles("ab cd  EFG") == result
    assert shingles("abcabcabc", k=3) == shingles("abc abc", k=3)
    assert len(shingles("abcabcabc", k=3)) == 3  # abc, bca, cab


def test_short_text_gives_one_shingle_of_the_whole_text() -> None:
    assert len(shingles("abc")) == 1
    assert len(shingles("")) == 1
    assert shingles("abc") != shingles("abd")
    assert shingles("abc") != shingles("")
    assert shingles("ABC ") == shingles("abc")


def test_shingles_work_for_chinese() -> None:
    text = "下列关于细胞呼吸的叙述正确的是"
    assert len(shingles(text)) == len(text) - 4
    assert shingles(text) != shingles(text.replace("正确", "错误"))


def test_jaccard() -> None:
    assert jaccard({1, 2, 3}, {2, 3, 4}) == 0.5
    assert jaccard({1}, {1}) == 1.0
    assert jaccard({1}, {2}) == 0.0
    assert jaccard(set(), set()) == 1.0
    assert jaccard(set(), {1}) == 0.0


@settings(max_examples=60)
@given(st.lists(st.text(alphabet="ab 文字Ｘ\t", max_size=12), max_size=8), st.integers(1, 6))
def test_batch_shingles_equal_single_text_shingles(texts: list[str], k: int) -> None:
    batch = shingle_batch(texts, k)
    assert len(batch) == len(texts)
    assert batch.offsets[-1] == len(batch.hashes)
    for i, text in enumerate(texts):
        assert batch.shingle_set(i) == shingles(text, k)


# ---------------------------------------------------------------- LSH params


def _candidate_probability(lsh: MinHashLSH, similarity: float) -> float:
    """The banding S-curve ``1 - (1 - s**rows)**bands`` (MMDS section 3.4)."""
    return float(1.0 - (1.0 - similarity**lsh.rows) ** lsh.bands)


def test_parameters_meet_the_s_curve_targets() -> None:
    lsh = MinHashLSH()
    assert lsh.num_perm == lsh.bands * lsh.rows
    assert _candidate_probability(lsh, NEAR_DUPLICATE_JACCARD) == pytest.approx(0.99988, abs=1e-5)
    assert _candidate_probability(lsh, 0.5) <= 0.1
    assert _candidate_probability(lsh, 0.3) <= 0.002
    # the import's scheme, as its docstring states it
    assert LSH.num_perm == LSH.bands * LSH.rows
    assert _candidate_probability(LSH, NEAR_DUPLICATE_JACCARD) == pytest.approx(0.9998, abs=1e-4)
    assert _candidate_probability(LSH, 0.5) == pytest.approx(0.40, abs=0.01)
    assert _candidate_probability(LSH, 0.3) == pytest.approx(0.06, abs=0.01)


def test_invalid_parameters_are_rejected() -> None:
    with pytest.raises(ValueError):
        MinHashLSH(num_perm=100, bands=16)
    with pytest.raises(ValueError):
        MinHashLSH(shingle_size=0)
    with pytest.raises(ValueError):
        MinHashLSH().band_keys(np.zeros((2, 64), dtype=np.uint32))


# ------------------------------------------------------------------ signatures


def _random_text(rng: random.Random, length: int) -> str:
    if rng.random() < 0.5:
        return "".join(rng.choice(ZH_CHARS) for _ in range(length))
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < length:
        words.append(rng.choice(EN_WORDS))
    return " ".join(words)


def _reference_signature(lsh: MinHashLSH, text: str) -> list[int]:
    """The documented contract, one permutation at a time in pure Python."""
    xs = [h & 0xFFFFFFFF for h in shingles(text, lsh.shingle_size)]
    mults = lsh._mult[:, 0].tolist()
    adds = lsh._add[:, 0].tolist()
    return [min((a * x + b) & 0xFFFFFFFF for x in xs) for a, b in zip(mults, adds, strict=True)]


def test_signatures_match_reference_and_do_not_depend_on_the_batch() -> None:
    rng = random.Random(3)
    lsh = MinHashLSH()
    texts = [_random_text(rng, rng.randint(0, 300)) for _ in range(40)]
    texts += ["x", "", _random_text(rng, 5000)]  # short texts and a multi-tile text
    sigs = lsh.signatures(texts)
    assert sigs.shape == (len(texts), lsh.num_perm)
    assert sigs.dtype == np.uint32
    for i in (0, 17, 39, 40, 41, 42):
        assert sigs[i].tolist() == _reference_signature(lsh, texts[i])
        assert np.array_equal(lsh.signatures([texts[i]])[0], sigs[i])
    assert np.array_equal(lsh.signatures(texts[::-1])[::-1], sigs)


def test_signature_agreement_estimates_jaccard() -> None:
    rng = random.Random(5)
    lsh = MinHashLSH()
    a = _random_text(rng, 400)
    b = a[:200] + _random_text(rng, 200)
    exact = jaccard(shingles(a), shingles(b))
    sa, sb = lsh.signatures([a, b])
    assert 0.2 < exact < 0.8
    assert abs(float(np.mean(sa == sb)) - exact) < 0.15


def test_empty_batch() -> None:
    lsh = MinHashLSH()
    assert lsh.signatures([]).shape == (0, lsh.num_perm)
    assert lsh.band_keys(lsh.signatures([])).shape == (0, lsh.bands)
    assert pairs_within(BatchSketch.of([])) == []


# ------------------------------------------------------------------- stability

STABLE_TEXTS = ["Which of the following is a prime number?", "下列说法正确的是", "", "ab"]

_SUBPROCESS_SCRIPT = """
import json, sys
from bank.duplicates.minhash import MinHashLSH, shingles
texts = json.loads(sys.argv[1])
lsh = MinHashLSH()
print(json.dumps({
    "keys": lsh.band_keys(lsh.signatures(texts)).tolist(),
    "shingles": [sorted(shingles(t)) for t in texts],
}))
"""


def _keys(lsh: MinHashLSH, texts: list[str]) -> Any:
    return lsh.band_keys(lsh.signatures(texts))


def test_band_keys_are_equal_across_instances() -> None:
    first, second = MinHashLSH(), MinHashLSH()
    keys = _keys(first, STABLE_TEXTS)
    assert keys.dtype == np.int64
    assert keys.shape == (len(STABLE_TEXTS), first.bands)
    assert np.array_equal(keys, _keys(second, STABLE_TEXTS))
    assert len(set(keys[0].tolist())) == first.bands  # bands are keyed separately
    other_seed = MinHashLSH(seed=1)
    assert not np.array_equal(keys, _keys(other_seed, STABLE_TEXTS))


def test_band_key_depends_on_every_row_of_its_band_only() -> None:
    lsh = MinHashLSH()
    signature = lsh.signatures(["Which of the following is a prime number?"])
    keys = lsh.band_keys(signature)[0]
    for column in range(lsh.num_perm):
        changed = signature.copy()
        changed[0, column] ^= 1
        differs = lsh.band_keys(changed)[0] != keys
        assert np.flatnonzero(differs).tolist() == [column // lsh.rows]


def test_band_keys_and_shingles_are_equal_in_a_fresh_process() -> None:
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # a salted hash() would differ
    completed = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS_SCRIPT, json.dumps(STABLE_TEXTS)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=60,
    )
    theirs = json.loads(completed.stdout)
    assert theirs["keys"] == _keys(MinHashLSH(), STABLE_TEXTS).tolist()
    assert theirs["shingles"] == [sorted(shingles(t)) for t in STABLE_TEXTS]


# ------------------------------------------------------------------ candidates


def test_candidate_pairs_from_hand_made_keys() -> None:
    keys = np.array([[1, 2], [3, 4], [1, 5], [6, 4], [7, 8]], dtype=np.int64)
    assert candidate_pairs_within(keys) == {(2, 0), (3, 1)}


def test_candidate_groups_of_identical_rows_give_all_pairs_once() -> None:
    keys = np.array([[1, 2]] * 4, dtype=np.int64)
    assert candidate_pairs_within(keys) == {(i, j) for i in range(4) for j in range(i)}


# ------------------------------------------------ near duplicates of a batch


def _edit(rng: random.Random, text: str, substitutions: int) -> str:
    chars = list(text)
    for _ in range(substitutions):
        pos = rng.randrange(len(chars))
        chars[pos] = rng.choice(ZH_CHARS + "xyzqk")
    return "".join(chars)


def _planted_corpus(seed: int) -> list[str]:
    """300 texts: 270 random ones and 30 edited copies spanning Jaccard ~0.8-1.0."""
    rng = random.Random(seed)
    texts = [_random_text(rng, rng.randint(100, 300)) for _ in range(270)]
    for i in range(30):
        source = texts[rng.randrange(len(texts))]
        if i % 10 == 0:
            texts.append("  " + source.upper() + "\n")  # normalises to the source
        else:
            texts.append(_edit(rng, source, rng.randint(1, 5)))
    order = list(range(len(texts)))
    rng.shuffle(order)
    return [texts[i] for i in order]


def _brute_force(
    new: Sequence[str], existing: Mapping[str, str], threshold: float
) -> set[tuple[int, Hashable, bool]]:
    new_sets = [shingles(t) for t in new]
    found: set[tuple[int, Hashable, bool]] = set()
    for i, j in itertools.combinations(range(len(new)), 2):
        if jaccard(new_sets[i], new_sets[j]) >= threshold:
            found.add((j, i, False))
    for key, text in existing.items():
        other = shingles(text)
        for i, s in enumerate(new_sets):
            if jaccard(s, other) >= threshold:
                found.add((i, key, True))
    return found


def _near_duplicates(texts: Sequence[str]) -> list[tuple[int, int, float]]:
    return pairs_within(BatchSketch.of(texts))


def _as_triples(result: list[tuple[int, int, float]]) -> set[tuple[int, Hashable, bool]]:
    return {(index, other, False) for index, other, _ in result}


@pytest.mark.parametrize("seed", [11, 12])
def test_lsh_equals_brute_force_on_planted_corpus(seed: int) -> None:
    texts = _planted_corpus(seed)
    expected = _brute_force(texts, {}, NEAR_DUPLICATE_JACCARD)
    result = _near_duplicates(texts)
    assert _as_triples(result) == expected
    # The corpus is informative: planted pairs fall on both sides of the threshold.
    all_sets = [shingles(t) for t in texts]
    similarities = [
        jaccard(all_sets[i], all_sets[j]) for i, j in itertools.combinations(range(300), 2)
    ]
    assert sum(0.8 <= s < NEAR_DUPLICATE_JACCARD for s in similarities) >= 3
    assert sum(NEAR_DUPLICATE_JACCARD <= s < 1.0 for s in similarities) >= 5
    assert len(expected) >= 8


def test_reported_pairs_are_verified_and_ordered() -> None:
    texts = _planted_corpus(14)
    result = _near_duplicates(texts)
    assert result
    for index, other, similarity in result:
        assert index > other
        exact = jaccard(shingles(texts[index]), shingles(texts[other]))
        assert similarity == exact >= NEAR_DUPLICATE_JACCARD
    assert [index for index, _, _ in result] == sorted(index for index, _, _ in result)


def test_chinese_near_duplicate_questions_are_found() -> None:
    question = (
        "下列关于植物细胞有丝分裂过程的叙述，正确的是：在分裂间期，细胞核中的DNA进行复制，"
        "染色体数目保持不变；在分裂前期，核膜逐渐消失，纺锤体由细胞两极发出的纺锤丝形成；"
        "在分裂后期，着丝点分裂，姐妹染色单体分开，染色体数目加倍；在分裂末期，出现细胞板。"
    )
    # One two-character substitution: 6 of ~120 shingles change, Jaccard ~0.9.
    reworded = question.replace("正确", "错误", 1)
    respaced = question.replace("DNA", " DNA ").replace("，", ", ")
    unrelated = "已知函数f(x)=x²-2x+3，求该函数在区间[0,3]上的最大值和最小值，并说明理由。"
    assert jaccard(shingles(question), shingles(reworded)) >= NEAR_DUPLICATE_JACCARD
    result = _near_duplicates([question, unrelated, reworded, respaced])
    assert _as_triples(result) == {(2, 0, False), (3, 0, False), (3, 2, False)}
    assert next(j for index, other, j in result if (index, other) == (3, 0)) == 1.0


def test_texts_equal_after_normalisation_are_near_duplicates() -> None:
    texts = [
        "What is the capital of France? Choose the best answer below.",
        "WHAT is the capital   of France?  Choose the best answer below.",
        "What is the capital of Germany? Choose the best answer below.",
        "Completely different question about photosynthesis in plants.",
    ]
    assert _near_duplicates(texts) == [(1, 0, 1.0)]


def test_neighbours_bounds_the_pairs_of_a_large_group_to_a_chain() -> None:
    lsh = MinHashLSH()
    keys = _keys(lsh, ["the very same templated question text, again and again"] * 10)
    assert len(candidate_pairs_within(keys)) == 45
    chained = candidate_pairs_within(keys, neighbours=2)
    assert chained == {(a, b) for a in range(10) for b in range(max(0, a - 2), a)}
