"""The bank keys of the test-suite (``bank.sealing``): one fixed, well-known key, so every
process a test starts (CLI, ``proctor serve``, judge workers) and the test process itself
open one another's sealed values. Never a production key: it is in the source.

A fixture plugin (``tests/conftest.py``): ``bank_keyring`` installs it in the test process."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator

import pytest

from bank import sealing
from bank.sealing import Keyring, parse_keyring

TEST_KEY_ID = "test"
TEST_BANK_KEYS = f"{TEST_KEY_ID}:" + base64.b64encode(
    hashlib.sha256(b"proctor test-suite bank key").digest()
).decode("ascii")
"""``PROCTOR_BANK_KEYS`` for test servers and commands."""


def test_keyring() -> Keyring:
    """The keyring of ``TEST_BANK_KEYS``."""
    return parse_keyring(TEST_BANK_KEYS, source="TEST_BANK_KEYS", lines=False)


test_keyring.__test__ = False  # type: ignore[attr-defined]  # not a test, despite its name


@pytest.fixture(scope="session", autouse=True)
def bank_keyring() -> Iterator[Keyring]:
    """The test keyring installed in the test process for the whole session: code under
    test seals and opens with it, as the servers and commands the tests start do."""
    keyring = test_keyring()
    with sealing.using(keyring):
        yield keyring


def install_test_keyring() -> None:
    """Install the test keyring for the rest of the process, and ``PROCTOR_BANK_KEYS`` in
    its environment (for the processes it starts): for benchmark scripts, which seal and
    open bank values outside pytest."""
    sealing.install(test_keyring())
    os.environ.setdefault("PROCTOR_BANK_KEYS", TEST_BANK_KEYS)
