"""The SDK's version, sent in the ``User-Agent`` header."""

from __future__ import annotations

from importlib import metadata

try:
    __version__ = metadata.version("proctor")
except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
    __version__ = "0.0.0"
