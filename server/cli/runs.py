"""``proctor runs``: start, follow, pause, resume and cancel evaluation runs the server
drives, over the server's API through the SDK (``--server``, ``--api-key``, as ``proctor
run`` and ``proctor endpoints`` do). ``proctor run-worker`` (``server.cli.run_worker``)
is the process that drives them next to a PostgreSQL + Redis deployment.

The model needs an endpoint first (``proctor endpoints set``). A refusal of the server is
``error: ...`` with exit status 1.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.table import Table

from clients.sdk.types import ENDED_RUN_STATES, RunState, SessionMode
from server.cli.groups import group, group_registrar
from server.cli.options import JsonFlag
from server.cli.output import stderr, stdout, table_console
from server.cli.remote import ApiKey, ServerUrl, connected, jsonable

app = group(
    "runs",
    "Runs the server drives: start, show, list, pause, cancel.",
    "proctor runs start MODEL_ID --sessions 3 --wait --server https://proctor.example.org",
    "proctor runs show RUN_ID",
)
register = group_registrar(app)
RunId = Annotated[str, typer.Argument(help="The run's id.")]
POLL_S = 2.0


@app.command("start")
def start(
    model_id: Annotated[str, typer.Argument(help="The registered model's id.")],
    server: ServerUrl,
    api_key: ApiKey,
    sessions: Annotated[int, typer.Option("--sessions", min=1, max=1000)] = 1,
    mode: Annotated[str, typer.Option("--mode", help="fixed or adaptive.")] = "fixed",
    n_items: Annotated[
        int | None, typer.Option("--n-items", min=1, help="Items per session (evaluators).")
    ] = None,
    cost_cap: Annotated[
        float | None, typer.Option("--cost-cap", min=0.000001, help="Stop before this (USD).")
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Follow it until it ends.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Start a run of new sessions driven by the server."""
    if mode not in (SessionMode.FIXED.value, SessionMode.ADAPTIVE.value):
        raise typer.BadParameter("--mode must be fixed or adaptive")
    with connected(server, api_key) as client:
        run = client.start_run(
            model_id=model_id, sessions=sessions, mode=mode, n_items=n_items, cost_cap_usd=cost_cap
        )
        if wait:
            run = _follow(client, run.id)
    _print_run(run, as_json)
    if run.state == RunState.FAILED:
        raise typer.Exit(1)


@app.command("show")
def show(
    run_id: RunId,
    server: ServerUrl,
    api_key: ApiKey,
    wait: Annotated[bool, typer.Option("--wait", help="Follow it until it ends.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Show a run and its progress."""
    with connected(server, api_key) as client:
        run = _follow(client, run_id) if wait else client.get_run(run_id)
    _print_run(run, as_json)


@app.command("list")
def list_command(
    server: ServerUrl,
    api_key: ApiKey,
    state: Annotated[RunState | None, typer.Option("--state", help="Only this state.")] = None,
    model_id: Annotated[str | None, typer.Option("--model-id", help="Only this model.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=500)] = 50,
    as_json: JsonFlag = False,
) -> None:
    """List runs, newest first."""
    with connected(server, api_key) as client:
        runs = client.list_runs(state=state, model_id=model_id, limit=limit)
    if as_json:
        stdout.print_json(data=[_json(run) for run in runs])
        return
    table = Table("run", "model", "state", "items", "cost (USD)", "created")
    for run in runs:
        table.add_row(
            run.id,
            run.model_id,
            str(run.state),
            f"{run.items_done}/{run.items_total}",
            f"{run.cost_usd:.4f}",
            run.created_at.isoformat(timespec="seconds"),
        )
    table_console().print(table)


def _move(action: str) -> Any:
    def command(
        run_id: RunId, server: ServerUrl, api_key: ApiKey, as_json: JsonFlag = False
    ) -> None:
        with connected(server, api_key) as client:
            run = getattr(client, f"{action}_run")(run_id)
        _print_run(run, as_json)

    return command


app.command("pause", help="Send no more items to the model until resumed.")(_move("pause"))
app.command("resume", help="Queue a paused run again.")(_move("resume"))
app.command("cancel", help="End a run; its open sessions are aborted.")(_move("cancel"))


def _follow(client: Any, run_id: str) -> Any:
    """The run once it has ended, with a progress line on stderr as it goes."""
    while True:
        run = client.get_run(run_id)
        eta = f", ETA {run.eta_s:.0f} s" if run.eta_s is not None else ""
        stderr.print(f"{run.state}: {run.items_done}/{run.items_total} items{eta}")
        if run.state in ENDED_RUN_STATES:
            return run
        time.sleep(POLL_S)


def _json(run: Any) -> dict[str, Any]:
    body = jsonable(run)
    body["progress"] = [dict(p) for p in body["progress"]]
    return body


def _print_run(run: Any, as_json: bool) -> None:
    if as_json:
        stdout.print_json(data=_json(run))
        return
    stdout.print(f"run {run.id}: {run.state} ({run.items_done}/{run.items_total} items)")
    stdout.print(
        f"tokens {run.prompt_tokens} in, {run.completion_tokens} out; cost {run.cost_usd:.4f} USD"
        + (f" of {run.cost_cap_usd} USD" if run.cost_cap_usd is not None else "")
    )
    if run.failures:
        stdout.print("failures: " + ", ".join(f"{k} {v}" for k, v in sorted(run.failures.items())))
    if run.stop_reason:
        stdout.print(f"stopped: {run.stop_reason}")
