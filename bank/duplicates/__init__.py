"""Duplicate items in the bank.

* :mod:`~bank.duplicates.exact`: the content hash of an item; an import refuses an item
  whose hash the bank already holds.
* :mod:`~bank.duplicates.minhash`: character shingles, MinHash signatures and LSH band
  keys (pure functions, stable across processes).
* :mod:`~bank.duplicates.near`: near duplicates at import, within the batch and against
  the bank through the stored band keys; they are imported and reported.
"""
