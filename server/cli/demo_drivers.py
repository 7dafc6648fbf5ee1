"""Who drives the demo's models through their sessions (``proctor demo --driver``).

* ``runner``: the evaluator runner on the client side, as ``proctor run`` does: the SDK
  and the model client in the demo's own process.
* ``server``: the server itself. Each model gets an endpoint (the local model server) and
  a run; on the embedded default the API process drives runs in process, as a deployment's
  ``proctor run-worker`` would, and the demo only follows their progress.

Either way the demo ends with the same sessions to score; a variant is one function of
the ``Drive`` signature in :data:`DRIVERS`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from rich.progress import Progress

from clients.llm.chat import ChatClient, ChatEndpoint
from clients.runner.progress import RunBar
from clients.runner.runner import RunConfig, Runner
from clients.runner.transcript import Transcript
from clients.sdk import AsyncProctorClient, EndpointSettings, RunState
from server.cli.demo_config import DemoDriver

RUN_POLL_S = 0.5
"""How often the server driver reads a run's progress."""


@dataclass
class DemoTenant:
    """A demo model in an organisation of its own, with that organisation's evaluator key."""

    name: str
    accuracy: float
    key: str
    model_id: str = ""


@dataclass(frozen=True, slots=True)
class DriveRequest:
    """Drive ``tenant``'s model (served as ``tenant.name`` at ``model_url``) through
    ``sessions`` sessions of ``items`` on the API at ``api_root``."""

    api_root: str
    model_url: str
    tenant: DemoTenant
    sessions: int
    items: int
    workdir: Path


@dataclass(frozen=True, slots=True)
class Driven:
    """The sessions a driver left to be scored, and what went wrong."""

    session_ids: list[str]
    errors: list[str]


Drive = Callable[[DriveRequest, Progress], Awaitable[Driven]]


async def register(client: AsyncProctorClient, tenant: DemoTenant) -> str:
    registered = await client.register_model(name=tenant.name, api_snapshot="demo", family="demo")
    tenant.model_id = str(registered.id)
    return tenant.model_id


async def drive_by_runner(request: DriveRequest, progress: Progress) -> Driven:
    """The client-side runner (``clients.runner``), a transcript per model in the workdir."""
    tenant = request.tenant
    task = progress.add_task(tenant.name, total=request.sessions * request.items)
    async with (
        AsyncProctorClient(request.api_root, tenant.key) as client,
        ChatClient(ChatEndpoint(base_url=request.model_url, model=tenant.name)) as model,
    ):
        model_id = await register(client, tenant)
        run = RunConfig(model_id=model_id, sessions=request.sessions, n_items=request.items)
        with Transcript(request.workdir / f"transcript-{tenant.name}.jsonl") as transcript:
            summary = await Runner(client, model, run, transcript, RunBar(progress, task)).run()
    outcomes = summary.outcomes
    return Driven(
        [o.session_id for o in outcomes if o.session_id],
        [o.error for o in outcomes if o.error],
    )


async def drive_by_server(request: DriveRequest, progress: Progress) -> Driven:
    """An endpoint and a run per model; the server drives, this follows ``items_done``."""
    tenant = request.tenant
    task = progress.add_task(tenant.name, total=request.sessions * request.items)
    async with AsyncProctorClient(request.api_root, tenant.key) as client:
        model_id = await register(client, tenant)
        endpoint = EndpointSettings(
            base_url=request.model_url, model=tenant.name, concurrency=request.sessions
        )
        await client.set_endpoint(model_id, endpoint)
        run = await client.start_run(
            model_id=model_id, sessions=request.sessions, n_items=request.items
        )
        while not run.done:
            await asyncio.sleep(RUN_POLL_S)
            run = await client.get_run(run.id)
            progress.update(task, completed=run.items_done)
    errors = []
    if run.state != RunState.FINISHED:
        errors.append(f"run {run.id} {run.state}: {run.stop_reason or 'no reason given'}")
    return Driven([p.session_id for p in run.progress if p.session_id], errors)


DRIVERS: dict[DemoDriver, Drive] = {
    DemoDriver.RUNNER: drive_by_runner,
    DemoDriver.SERVER: drive_by_server,
}
