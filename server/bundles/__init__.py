"""Signed, offline-checkable bundles of one session's record (``server.bundles.format``)."""
