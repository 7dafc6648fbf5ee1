"""``proctor fake-llm serve``: run the stand-in provider (one uvicorn process)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated

import typer
import uvicorn

fake_llm_app = typer.Typer(help="A stand-in OpenAI-compatible LLM provider.", no_args_is_help=True)


@fake_llm_app.callback()
def _group() -> None:
    """A stand-in LLM provider speaking the OpenAI chat-completions protocol."""


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints its base URL and models once it is listening."""

    def __init__(self, config: uvicorn.Config, models: list[str]) -> None:
        super().__init__(config)
        self._models = models

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.started:
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        typer.echo(f"fake LLM listening on http://{shown}:{port}/v1")
        typer.echo(f"models: {', '.join(self._models)}")


@fake_llm_app.command("serve")
def serve(
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port to listen on (0: any free port).")
    ] = 8090,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    latency_ms: Annotated[
        float, typer.Option(min=0.0, help="Delay before every chat reply, in milliseconds.")
    ] = 0.0,
    error_rate: Annotated[
        float,
        typer.Option(
            min=0.0, max=1.0, help="Fraction of chat requests answered with --error-status."
        ),
    ] = 0.0,
    retry_after: Annotated[
        float,
        typer.Option(
            min=0.0, help="Seconds advertised by injected errors (Retry-After, retry-after-ms)."
        ),
    ] = 1.0,
    error_status: Annotated[
        int, typer.Option(min=400, max=599, help="HTTP status of injected errors.")
    ] = 429,
    seed: Annotated[
        int, typer.Option(help="Seed of correctness, judge noise and error injection.")
    ] = 0,
    profiles: Annotated[
        Path | None,
        typer.Option(dir_okay=False, help="JSON file adding or overriding model profiles."),
    ] = None,
    answer_key: Annotated[
        str | None,
        typer.Option(
            help="Reference answers: a JSONL file, or a Proctor database URL (scheme://...)."
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(help="Require 'Authorization: Bearer KEY' on /v1/* (401 otherwise)."),
    ] = None,
) -> None:
    """Serve the OpenAI-compatible API until interrupted.

    POST /v1/chat/completions, GET /v1/models and GET /stats (counters of chat
    requests)."""
    # imported here, so that `proctor fake-llm --help` needs no database driver
    from fakellm.answer_key import AnswerKey, AnswerKeyError
    from fakellm.app import ServerConfig, create_app
    from fakellm.profiles import BUILTIN_PROFILES, ProfileError, load_profiles

    try:
        served = load_profiles(profiles) if profiles is not None else dict(BUILTIN_PROFILES)
        key = AnswerKey.load(answer_key) if answer_key is not None else None
    except (ProfileError, AnswerKeyError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    config = ServerConfig(
        profiles=served,
        answer_key=key,
        latency_ms=latency_ms,
        error_rate=error_rate,
        retry_after=retry_after,
        error_status=error_status,
        seed=seed,
        api_key=api_key,
    )
    if key is None:
        typer.echo("no --answer-key: models will answer every question with 'I don't know'")
    else:
        typer.echo(f"answer key: {len(key)} questions")
    server = _AnnouncingServer(
        uvicorn.Config(
            create_app(config),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            proxy_headers=False,
            server_header=False,
        ),
        sorted(served),
    )
    server.run()
