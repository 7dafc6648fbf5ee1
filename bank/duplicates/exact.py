"""Exact duplicates: the content hash that identifies an item at import.

Two items that differ only in whitespace, letter case or full-width/half-width forms have
the same :func:`content_hash`; any other difference (including the order of the options)
gives a different one. The importer stores the hash and refuses a second item with the
same one. :func:`normalise_text` is the normalisation both this hash and the shingles of
:mod:`bank.duplicates.minhash` start from.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Sequence

__all__ = ["content_hash", "normalise_text"]


def normalise_text(text: str) -> str:
    """Normalise text for duplicate comparison.

    Parameters
    ----------
    text : str
        Any text.

    Returns
    -------
    str
        ``text`` in Unicode NFKC (which folds full-width letters, digits and
        punctuation such as ``，`` to their ASCII forms), case-folded, NFKC again (so
        the result is stable under a second call), with every run of whitespace
        replaced by one space and no leading or trailing whitespace.
    """
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(folded.split())


def content_hash(qtype: str, question: str, options: Sequence[str] | None) -> str:
    """Hash an item's identity for exact-duplicate detection.

    Parameters
    ----------
    qtype : str
        Question type, used verbatim (it is a closed vocabulary, already validated).
    question : str
        Question text; normalised with :func:`normalise_text`.
    options : sequence of str or None
        Answer options in order, each normalised; ``None`` (no options) is distinct
        from an empty list.

    Returns
    -------
    str
        Lower-case hex SHA-256 (64 characters) of the UTF-8 JSON array
        ``[qtype, question, options]``. JSON quoting makes the encoding unambiguous:
        no choice of texts can make different fields run into each other.
    """
    opts = None if options is None else [normalise_text(o) for o in options]
    payload = json.dumps(
        [qtype, normalise_text(question), opts], ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
