"""Console helpers for HTTP tests: log in through the form, read a page's CSRF token."""

from __future__ import annotations

import re

import httpx

CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')
LOGIN_FIELD = re.compile(r'name="login_token" value="([^"]+)"')


async def console_login(client: httpx.AsyncClient, key: str) -> httpx.Response:
    """Log ``client`` in with API key ``key`` through the login form; the client keeps the
    cookie. Returns the login POST's response (303 on success). Sends the ``Origin`` a
    browser sends with the form (the login refuses a missing one)."""
    form = await client.get("/console/login")
    match = LOGIN_FIELD.search(form.text)
    assert match, form.text
    return await client.post(
        "/console/login",
        data={"api_key": key, "login_token": match.group(1)},
        headers={"origin": own_origin(client)},
    )


def own_origin(client: httpx.AsyncClient) -> str:
    """The ``Origin`` a browser on ``client``'s server sends: scheme and host."""
    return f"{client.base_url.scheme}://{client.base_url.netloc.decode()}"


def csrf_token(html: str) -> str:
    """The CSRF token in a console page's forms."""
    match = CSRF_FIELD.search(html)
    assert match, "no CSRF token on the page"
    return match.group(1)
