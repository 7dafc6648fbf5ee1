"""Shared test support: servers, databases, the API harness, the fake LLM, factories."""
