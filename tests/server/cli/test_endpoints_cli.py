"""``proctor endpoints`` as a user runs it (a process per command) against the real app
served over HTTP, with the fake LLM provider on 127.0.0.1 requiring a key: the key goes in
through an environment variable, reaches the provider on the check, and never comes back
out of any command."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from fakellm.app import ServerConfig
from tests.clients.test_sdk_harness import model_of, sdk_settings, seeded, serving
from tests.support.api import World
from tests.support.cli import Run, proctor
from tests.support.fake_llm import FakeLlm, running_fake_llm

PROVIDER_KEY = "sk-PLANTED-cli-5e1f00d4a3"
"""The provider's key: the fake LLM refuses any other; no command may print it."""


@pytest.fixture
async def world_db(fresh_db_url: str) -> tuple[str, World]:
    return await seeded(fresh_db_url)


@pytest.fixture
def served(world_db: tuple[str, World]) -> Iterator[tuple[str, World, FakeLlm]]:
    """The app (allowed to call 127.0.0.1, as an operator would allow a host) and a
    provider that wants ``PROVIDER_KEY``."""
    db_url, world = world_db
    with (
        running_fake_llm(ServerConfig(api_key=PROVIDER_KEY)) as llm,
        serving(sdk_settings(db_url, egress_allow=["127.0.0.1"])) as url,
    ):
        yield url, world, llm


def endpoints(url: str, world: World, *args: str, role: str = "vendor", **env: str) -> Run:
    run = proctor("endpoints", *args, "--server", url, "--api-key", world.a.keys[role], env=env)
    assert PROVIDER_KEY not in run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    return run


def test_an_endpoint_is_set_shown_checked_and_deleted(
    served: tuple[str, World, FakeLlm],
) -> None:
    url, world, llm = served
    model = model_of(world)
    secret = {"PROVIDER_AUTH": f"Bearer {PROVIDER_KEY}"}
    set_run = endpoints(
        url, world, "set", model, "--base-url", llm.base_url, "--model", "model-strong",
        "--secret-header", "Authorization=PROVIDER_AUTH", "--stop", "###",
        "--usd-per-mtok-in", "0.5", "--json", **secret,
    )  # fmt: skip
    assert set_run.returncode == 0, set_run.stderr
    shown = json.loads(set_run.stdout)
    assert (shown["model"], shown["stop"]) == ("model-strong", ["###"])
    assert shown["usd_per_mtok_in"] == 0.5
    assert shown["secret_headers"] == ["Authorization"]

    table = endpoints(url, world, "show", model, role="evaluator")  # the organisation's
    assert table.returncode == 0, table.stderr
    assert llm.base_url in table.stdout and "Authorization" in table.stdout

    check = endpoints(url, world, "check", model)
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith("ok in ")
    assert llm.stats()["requests"] == 1

    cleared = endpoints(
        url, world, "set", model, "--base-url", llm.base_url, "--model", "model-strong",
        "--clear-secrets",
    )  # fmt: skip
    assert cleared.returncode == 0, cleared.stderr
    refused = endpoints(url, world, "check", model, "--json")
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["failure"] == "rejected"  # the provider's 401

    assert endpoints(url, world, "delete", model).returncode == 0
    gone = endpoints(url, world, "show", model)
    assert gone.returncode == 1 and "404" in gone.stderr


def test_bad_input_is_one_line_and_never_echoes_a_secret(
    served: tuple[str, World, FakeLlm],
) -> None:
    url, world, llm = served
    model = model_of(world)
    base = ("set", model, "--model", "m")
    unset = endpoints(
        url, world, *base, "--base-url", llm.base_url, "--secret-header", "X-Key=NOT_SET_HERE"
    )
    assert unset.returncode == 2 and "NOT_SET_HERE" in unset.stderr
    malformed = endpoints(url, world, *base, "--base-url", llm.base_url, "--secret-header", "X")
    assert malformed.returncode == 2 and "NAME=VARIABLE" in malformed.stderr
    both = endpoints(
        url, world, *base, "--base-url", llm.base_url, "--clear-secrets",
        "--secret-header", "X-Key=PROVIDER_AUTH", PROVIDER_AUTH=PROVIDER_KEY,
    )  # fmt: skip
    assert both.returncode == 2
    ftp = endpoints(url, world, *base, "--base-url", "ftp://models.example.com/v1")
    assert ftp.returncode == 1 and "422" in ftp.stderr and "http" in ftp.stderr
    bad_value = endpoints(
        url, world, *base, "--base-url", llm.base_url,
        "--secret-header", "X-Key=PROVIDER_AUTH", PROVIDER_AUTH=f"{PROVIDER_KEY}\nInjected: 1",
    )  # fmt: skip
    assert bad_value.returncode == 1 and "422" in bad_value.stderr
    # an address the egress guard refuses: no call is made, the failure says why
    loopback = endpoints(url, world, *base, "--base-url", "http://[::1]:9/v1")
    assert loopback.returncode == 0, loopback.stderr
    refused = endpoints(url, world, "check", model)
    assert refused.returncode == 1 and "egress_refused" in refused.stderr
    assert llm.stats()["requests"] == 0
