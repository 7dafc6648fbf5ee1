"""Drawing the items of a planned sample (pure; the database layer feeds it candidates).

Each stratum has a seeded stream of distinct random ranks, i.e. the prefix of a uniform
random permutation of its slots. Walking the stream and keeping the first ``quota``
candidates that are eligible (active, family not served to the organisation, family not
already in this sample) is a uniform draw without replacement from the eligible items;
the same seed and bank state give the same sample.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from bank.stratum_key import StratumKey

DENSE_SWITCH = 0.5
"""Once this share of a stratum has been drawn, shuffle the rest instead of rejecting."""


class Candidate(NamedTuple):
    """An item found at a drawn slot, with what decides its eligibility (a tuple: thousands
    are made per sample)."""

    rank: int
    item_id: uuid.UUID
    family_id: uuid.UUID
    eligible: bool
    """Active and its family not yet served to the organisation."""


MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    """SplitMix64 finaliser (Steele, Lea & Flood 2014): a stable 64-bit mixer."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def stream_seed(seed: str, key: StratumKey) -> int:
    """A 64-bit seed for one stratum's stream, from the sample seed and the stratum's names."""
    material = "\x1f".join((seed, key.discipline, key.qtype, key.subdiscipline)).encode()
    return int.from_bytes(hashlib.blake2b(material, digest_size=8).digest(), "big")


class RankStream:
    """Distinct uniformly random ranks in ``range(n_slots)``, reproducible from the seed.

    Draws ``splitmix64(state + i) mod n_slots`` and rejects repeats (the modulo bias is below
    2**-32 for any stratum size that fits a slot); past ``DENSE_SWITCH`` of the stratum it
    shuffles what is left instead, so exhausting a stratum costs O(n).
    """

    def __init__(self, seed: str, key: StratumKey, n_slots: int) -> None:
        self.n_slots = n_slots
        self.drawn: list[int] = []
        self._state = stream_seed(seed, key)
        self._counter = 0
        self._seen: set[int] = set()
        self._rest: Iterator[int] | None = None

    @property
    def exhausted(self) -> bool:
        return len(self.drawn) >= self.n_slots

    def extend(self, count: int) -> list[int]:
        """Draw up to ``count`` more ranks; returns the new ones (fewer when exhausted)."""
        new: list[int] = []
        while len(new) < count and not self.exhausted:
            rank = self._next()
            self.drawn.append(rank)
            new.append(rank)
        return new

    def _next(self) -> int:
        if self._rest is None and len(self._seen) < DENSE_SWITCH * self.n_slots:
            while True:
                self._counter += 1
                rank = _splitmix64(self._state + self._counter) % self.n_slots
                if rank not in self._seen:
                    self._seen.add(rank)
                    return rank
        if self._rest is None:
            rest = [r for r in range(self.n_slots) if r not in self._seen]
            random.Random(self._state).shuffle(rest)
            self._rest = iter(rest)
        return next(self._rest)


@dataclass(slots=True)
class Selection:
    """Chosen candidates per stratum; ``starved`` strata ran out of drawn candidates."""

    chosen: dict[StratumKey, list[Candidate]] = field(default_factory=dict)
    starved: dict[StratumKey, int] = field(default_factory=dict)
    """Stratum -> how many more items it still needs."""


def select(
    quotas: Mapping[StratumKey, int],
    candidates: Mapping[StratumKey, Sequence[Candidate]],
) -> Selection:
    """Keep, stratum by stratum in key order, the first eligible candidates of new families.

    ``candidates[key]`` must be in stream order. A missing rank (a slot with no item) is
    simply absent from the sequence.
    """
    selection = Selection()
    families: set[uuid.UUID] = set()
    for key in sorted(quotas):
        quota = quotas[key]
        kept: list[Candidate] = []
        for cand in candidates.get(key, ()):
            if len(kept) == quota:
                break
            if cand.eligible and cand.family_id not in families:
                kept.append(cand)
                families.add(cand.family_id)
        selection.chosen[key] = kept
        if len(kept) < quota:
            selection.starved[key] = quota - len(kept)
    return selection


def delivery_order(seed: str, item_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """The order items are served in: a seeded shuffle, so disciplines are interleaved."""
    order = sorted(item_ids)
    random.Random(f"order\x1f{seed}").shuffle(order)
    return order
