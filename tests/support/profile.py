"""How many examples the whole-API fuzzers draw per operation: the suite's test profile.

``PROCTOR_TEST_PROFILE`` picks it:

* ``quick`` (the default: the README's ``pytest``, ``.ci/run``, a developer's loop) draws
  the smaller number each fuzzer names;
* ``thorough`` (by hand before a release: ``PROCTOR_TEST_PROFILE=thorough pytest
  tests/system``) draws the larger one.

Both run every operation, role and backend with every check; only the number of generated
cases per operation differs. The fuzzers are the ones whose cost is their example count:
Schemathesis over the OpenAPI document (``tests/system/test_schemathesis.py``) and the
hypothesis-drawn hostile text (``tests/system/test_hostile_input.py``). Property tests of
the pure logic keep their fixed counts: they cost seconds.
"""

from __future__ import annotations

import os
from enum import StrEnum

PROFILE_ENV = "PROCTOR_TEST_PROFILE"


class Profile(StrEnum):
    QUICK = "quick"
    THOROUGH = "thorough"


def current() -> Profile:
    """The profile ``PROCTOR_TEST_PROFILE`` names (``quick`` when unset); an unknown name is
    an error, not a silent default."""
    value = os.environ.get(PROFILE_ENV, Profile.QUICK.value)
    try:
        return Profile(value)
    except ValueError:
        known = ", ".join(p.value for p in Profile)
        raise RuntimeError(f"{PROFILE_ENV}={value!r}: expected one of {known}") from None


def examples(*, quick: int, thorough: int) -> int:
    """The example count of the current profile."""
    return thorough if current() is Profile.THOROUGH else quick
