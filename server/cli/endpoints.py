"""``proctor endpoints``: how the server calls a registered model, over the server's API.

The commands talk to a running server with ``--server`` and ``--api-key`` through the SDK
(:class:`clients.sdk.ProctorClient`), as ``proctor run`` does, and may do what the key may:
a vendor sets its own models' endpoints, an evaluator its organisation's, an admin any.

A secret header's value never goes on the command line, where process lists and shell
histories show it: ``--secret-header NAME=VARIABLE`` reads it from the environment
variable ``VARIABLE``. The server seals it and never sends it back; ``show`` lists the
names only. A refusal of the server is ``error: ...`` with exit status 1.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer
from rich.table import Table

from clients.sdk.types import ModelApi
from server.cli.groups import group, group_registrar
from server.cli.options import JsonFlag
from server.cli.output import fail, stdout, table_console
from server.cli.remote import ApiKey, ServerUrl, connected, jsonable

app = group(
    "endpoints",
    "How the server calls a model: set, show, delete, check.",
    "proctor endpoints set MODEL_ID --base-url https://api.example.com/v1 --model m-1 "
    "--secret-header Authorization=PROVIDER_AUTH",
    "proctor endpoints check MODEL_ID",
)
register = group_registrar(app)

ModelId = Annotated[str, typer.Argument(help="The registered model's id.")]


def secret_headers(pairs: list[str], environ: dict[str, str]) -> dict[str, str]:
    """``{NAME: value of VARIABLE}`` for each ``NAME=VARIABLE``; ``typer.BadParameter``
    naming the pair (never a value) when one is malformed or its variable is unset."""
    headers: dict[str, str] = {}
    for pair in pairs:
        name, sep, variable = pair.partition("=")
        if not sep or not name or not variable:
            raise typer.BadParameter(f"{pair!r} is not NAME=VARIABLE", param_hint="--secret-header")
        value = environ.get(variable)
        if not value:
            raise typer.BadParameter(
                f"environment variable {variable} (for header {name}) is not set",
                param_hint="--secret-header",
            )
        headers[name] = value
    return headers


def _secrets(pairs: list[str], clear: bool) -> dict[str, str] | None:
    if clear and pairs:
        raise typer.BadParameter("give --secret-header or --clear-secrets, not both")
    if clear:
        return {}
    return secret_headers(pairs, dict(os.environ)) if pairs else None


@app.command("set")
def set_endpoint(
    model_id: ModelId,
    server: ServerUrl,
    api_key: ApiKey,
    base_url: Annotated[
        str, typer.Option("--base-url", help="The OpenAI-compatible API root (…/v1).")
    ],
    model: Annotated[str, typer.Option("--model", help="The model's name at the endpoint.")],
    api: Annotated[
        ModelApi | None, typer.Option("--api", help="chat, or completions with --template.")
    ] = None,
    template: Annotated[
        str | None, typer.Option("--template", help="chatml, llama3 or alpaca (completions).")
    ] = None,
    paradigm: Annotated[
        str | None, typer.Option("--paradigm", help="zero-shot, few-shot or cot.")
    ] = None,
    adapter: Annotated[str | None, typer.Option("--adapter", help="The prompt adapter.")] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", min=0, max=2)] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1)] = None,
    stop: Annotated[
        list[str] | None, typer.Option("--stop", help="A stop sequence (repeatable).")
    ] = None,
    read_timeout_s: Annotated[
        float | None, typer.Option("--read-timeout", help="Seconds to wait for a reply.")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", min=1, help="Calls in flight at once.")
    ] = None,
    requests_per_minute: Annotated[int | None, typer.Option("--rpm", min=1)] = None,
    tokens_per_minute: Annotated[int | None, typer.Option("--tpm", min=1)] = None,
    usd_per_mtok_in: Annotated[
        float | None, typer.Option("--usd-per-mtok-in", min=0, help="Price per M input tokens.")
    ] = None,
    usd_per_mtok_out: Annotated[
        float | None, typer.Option("--usd-per-mtok-out", min=0, help="Price per M output tokens.")
    ] = None,
    secret_header: Annotated[
        list[str] | None,
        typer.Option(
            "--secret-header",
            help="NAME=VARIABLE: send header NAME with the value of environment variable "
            "VARIABLE (repeatable; left out, the stored secret headers stay).",
        ),
    ] = None,
    clear_secrets: Annotated[
        bool, typer.Option("--clear-secrets", help="Remove the stored secret headers.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Set the model's endpoint (replacing the one it had)."""
    from clients.sdk import EndpointSettings

    settings = EndpointSettings(
        base_url=base_url,
        model=model,
        api=api,
        template=template,
        paradigm=paradigm,
        adapter=adapter,
        temperature=temperature,
        max_tokens=max_tokens,
        stop=stop or None,
        read_timeout_s=read_timeout_s,
        concurrency=concurrency,
        requests_per_minute=requests_per_minute,
        tokens_per_minute=tokens_per_minute,
        usd_per_mtok_in=usd_per_mtok_in,
        usd_per_mtok_out=usd_per_mtok_out,
        secret_headers=_secrets(secret_header or [], clear_secrets),
    )
    with connected(server, api_key) as client:
        endpoint = client.set_endpoint(model_id, settings)
    _print_endpoint(endpoint, as_json)


@app.command("show")
def show_endpoint(
    model_id: ModelId, server: ServerUrl, api_key: ApiKey, as_json: JsonFlag = False
) -> None:
    """Show the model's endpoint (secret headers by name only)."""
    with connected(server, api_key) as client:
        endpoint = client.get_endpoint(model_id)
    _print_endpoint(endpoint, as_json)


@app.command("delete")
def delete_endpoint(model_id: ModelId, server: ServerUrl, api_key: ApiKey) -> None:
    """Remove the model's endpoint and its secret headers."""
    with connected(server, api_key) as client:
        client.delete_endpoint(model_id)
    stdout.print(f"removed the endpoint of model {model_id}")


@app.command("check")
def check_endpoint(
    model_id: ModelId, server: ServerUrl, api_key: ApiKey, as_json: JsonFlag = False
) -> None:
    """Have the server call the endpoint once (status 1 if it failed)."""
    with connected(server, api_key) as client:
        check = client.check_endpoint(model_id)
    if as_json:
        stdout.print_json(data=jsonable(check))
    elif check.ok:
        stdout.print(f"ok in {check.latency_s:.2f} s: {check.reply!r}")
    if not check.ok:
        fail(f"{check.failure}: {check.detail}")


def _print_endpoint(endpoint: Any, as_json: bool) -> None:
    if as_json:
        stdout.print_json(data=jsonable(endpoint))
        return
    table = Table("field", "value", show_header=False)
    for name, value in jsonable(endpoint).items():
        shown = ", ".join(value) if isinstance(value, list) else value
        table.add_row(name, "" if shown is None else str(shown))
    table_console().print(table)
