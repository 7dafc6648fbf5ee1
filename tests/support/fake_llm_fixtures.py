"""Fake LLM fixtures: the local OpenAI-compatible server that plays both judge and model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fake_llm import FakeLlm, running_fake_llm


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLlm]:
    """The local LLM server with its default profiles, one per test module."""
    with running_fake_llm() as server:
        yield server
