"""``proctor run``: drive an OpenAI-compatible model endpoint through Proctor sessions."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from clients.llm.chat import ChatClient, ChatEndpoint
from clients.runner.adapters import ADAPTERS, TEMPLATES, TemplateName, get_adapter
from clients.runner.progress import SessionBars, item_progress
from clients.runner.prompts import PARADIGMS, Paradigm
from clients.runner.runner import RunConfig, Runner, summary_json
from clients.runner.transcript import Transcript
from clients.sdk import AdaptiveOptions, AsyncProctorClient, SessionMode

stderr = Console(stderr=True, highlight=False)


def run_command(
    server: Annotated[str, typer.Option("--server", help="Proctor's base URL.")],
    api_key: Annotated[
        str, typer.Option("--api-key", envvar="PROCTOR_API_KEY", help="Your Proctor API key.")
    ],
    model_id: Annotated[str, typer.Option("--model-id", help="The registered model's id.")],
    endpoint: Annotated[
        str,
        typer.Option("--endpoint", help="The model's OpenAI-compatible base URL (…/v1)."),
    ],
    model: Annotated[str, typer.Option("--model", help="Model name at the endpoint.")],
    endpoint_api_key: Annotated[
        str | None,
        typer.Option("--endpoint-api-key", envvar="OPENAI_API_KEY", help="The endpoint's key."),
    ] = None,
    paradigm: Annotated[
        str, typer.Option("--paradigm", help=f"One of {', '.join(PARADIGMS)}.")
    ] = "zero-shot",
    sessions: Annotated[int, typer.Option("--sessions", min=1, help="Sessions to finish.")] = 3,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Sessions driven at once.")
    ] = 1,
    n_items: Annotated[
        int | None, typer.Option("--n-items", min=1, help="Items per session (evaluators).")
    ] = None,
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="fixed, or adaptive: the server picks each item from the scores so far and "
            "stops when its estimate is precise enough (--n-items is then the budget).",
        ),
    ] = "fixed",
    target_halfwidth: Annotated[
        float | None,
        typer.Option(
            "--target-halfwidth",
            min=0.01,
            help="Adaptive sessions: stop at this half-width (score points, 0-100).",
        ),
    ] = None,
    adapter: Annotated[
        str, typer.Option("--adapter", help=f"One of {', '.join(sorted(ADAPTERS))}.")
    ] = "openai",
    system_prompt: Annotated[
        str | None, typer.Option("--system-prompt", help="Replaces the adapter's.")
    ] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1)] = None,
    template: Annotated[
        str | None,
        typer.Option(
            "--template",
            help=f"Raw-completion endpoint: render prompts in {', '.join(TEMPLATES)} and "
            "send them to /completions.",
        ),
    ] = None,
    transcript: Annotated[
        Path | None,
        typer.Option(
            "--transcript",
            help="JSONL transcript (default: proctor-run-MODEL_ID.jsonl); a re-run with the "
            "same file resumes.",
        ),
    ] = None,
    read_timeout_s: Annotated[float, typer.Option("--read-timeout", min=1.0)] = 600.0,
) -> None:
    """Drive a model endpoint through Proctor sessions.

    Each item goes to the model, each answer to Proctor. Resumes after a crash: sessions
    this transcript opened, and open sessions of the model, are driven on from where the
    server says they stand."""
    if paradigm not in PARADIGMS:
        raise typer.BadParameter(f"--paradigm must be one of {', '.join(PARADIGMS)}")
    if template is not None and template not in TEMPLATES:
        raise typer.BadParameter(f"--template must be one of {', '.join(TEMPLATES)}")
    if mode not in ("fixed", "adaptive"):
        raise typer.BadParameter("--mode must be fixed or adaptive")
    if target_halfwidth is not None and mode != "adaptive":
        raise typer.BadParameter("--target-halfwidth is for --mode adaptive")
    try:
        chosen = get_adapter(adapter)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    config = RunConfig(
        model_id=model_id,
        sessions=sessions,
        concurrency=concurrency,
        paradigm=_paradigm(paradigm),
        adapter=chosen,
        system_prompt=system_prompt,
        n_items=n_items,
        mode=SessionMode(mode),
        adaptive=AdaptiveOptions(target_halfwidth=target_halfwidth) if target_halfwidth else None,
        max_tokens=max_tokens,
        template=_template(template),
    )
    chat = ChatEndpoint(
        base_url=endpoint, model=model, api_key=endpoint_api_key, read_timeout_s=read_timeout_s
    )
    path = transcript or Path(f"proctor-run-{model_id}.jsonl")
    result = asyncio.run(_run(server, api_key, chat, config, path))
    typer.echo(json.dumps(result, indent=2))
    if result["failed"]:
        raise typer.Exit(1)


def _paradigm(name: str) -> Paradigm:
    for known in ("zero-shot", "few-shot", "cot"):
        if name == known:
            return known
    raise typer.BadParameter(f"--paradigm must be one of {', '.join(PARADIGMS)}")


def _template(name: str | None) -> TemplateName | None:
    for known in ("chatml", "llama3", "alpaca"):
        if name == known:
            return known
    return None


async def _run(
    server: str, api_key: str, chat: ChatEndpoint, config: RunConfig, path: Path
) -> dict[str, object]:
    async with (
        AsyncProctorClient(server, api_key) as client,
        ChatClient(chat, concurrency=config.concurrency) as model,
    ):
        with Transcript(path) as transcript, item_progress(stderr) as progress:
            runner = Runner(client, model, config, transcript, SessionBars(progress))
            summary = await runner.run()
    result = summary_json(summary)
    result["transcript"] = str(path)
    return result
