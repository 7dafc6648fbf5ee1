"""The test bank key for these tests (the bank's reference answers are sealed at rest)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bank import sealing
from tests.support.bank_keys import test_keyring


@pytest.fixture(autouse=True)
def bank_keyring() -> Iterator[None]:
    with sealing.using(test_keyring()):
        yield
