"""Shared pytest configuration for the Proctor test-suite: the fixture plugins below.

Test helpers live in ``tests.support`` and are imported as ``tests.support.<module>``: tests/
is a package, and pytest puts the repository root on sys.path. (Putting tests/ itself there
would let tests/bank shadow the real ``bank`` package.)

* ``tests.support.interpreter``: bytecode caches kept, the garbage collector tuned;
* ``tests.support.parallel``: how many xdist workers the default ``-n auto`` starts;
* ``tests.support.service_fixtures``: throwaway PostgreSQL and Redis servers, and the
  ``postgres`` / ``redis`` markers on the tests that use them;
* ``tests.support.database``: migrated SQLite/PostgreSQL databases, per-test sessions;
* ``tests.support.api_fixtures``: a seeded database and the running app on each backend;
* ``tests.support.fake_llm_fixtures``: the local LLM server (``llm``), one per module;
* ``tests.support.browser_fixtures``: Debian's Chromium through Playwright (``chromium``)
  and a live console server to drive (``console_site``).

pytest calls only one ``pytest_collection_modifyitems`` per plugin; add a new fixture plugin
module under tests/support/ rather than fixtures here.
"""

pytest_plugins = [
    "tests.support.interpreter",
    "tests.support.parallel",
    "tests.support.bank_keys",
    "tests.support.service_fixtures",
    "tests.support.database",
    "tests.support.api_fixtures",
    "tests.support.fake_llm_fixtures",
    "tests.support.browser_fixtures",
    "tests.support.http_target",
]
