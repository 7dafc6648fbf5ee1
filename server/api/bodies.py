"""The base of every request body.

Unknown fields are refused (422) everywhere, so a typo or a field from another route is
never silently ignored. Text in bodies is checked once for every field by
``server.api.guard`` (NUL, lone surrogates, invalid UTF-8, nesting), before validation.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RequestBody(BaseModel):
    """A JSON request body: unknown fields are an error."""

    model_config = ConfigDict(extra="forbid")
