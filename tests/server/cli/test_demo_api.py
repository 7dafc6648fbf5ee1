"""The demo's API in a child process (``server.cli.demo_api``): it serves the settings it is
handed over real HTTP, stops when the parent is done, and a parent that stops before
handing settings over leaves no process behind."""

from __future__ import annotations

from pathlib import Path

import httpx

from server.cli.demo_api import ApiProcess
from server.database import upgrade
from tests.support.api import test_settings


def test_the_child_serves_the_settings_it_is_handed_and_stops_with_the_parent(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'demo.db'}"
    upgrade(url)
    settings = test_settings(url, data_dir=tmp_path, scoring_in_process=True)
    with ApiProcess() as api:
        root = api.start(settings)
        assert root.startswith("http://127.0.0.1:")
        assert httpx.get(f"{root}/healthz", timeout=30).status_code == 200
        # the child's app is ours: an unknown key is refused by its authentication
        refused = httpx.post(f"{root}/v1/auth/token", json={"api_key": "nope"}, timeout=30)
        assert refused.status_code == 401
        child = api._process
    assert child.returncode == 0  # stopped cleanly (lifespan shutdown), not killed
    try:
        httpx.get(f"{root}/healthz", timeout=2)
    except httpx.TransportError:
        pass
    else:
        raise AssertionError("the API still answers after the demo stopped it")


def test_a_parent_that_stops_before_the_api_is_needed_leaves_no_child() -> None:
    api = ApiProcess()
    assert api.stop() == 0
