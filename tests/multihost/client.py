"""The client host of the multi-host run: runner sessions against Proctor through the proxy.

Run by :mod:`tests.multihost.run` inside the client namespace::

    python -m tests.multihost.client --server http://10.231.0.40 --key KEY --sessions 40 \
        --items 30 --endpoint http://127.0.0.1:8090/v1 --model model-mid --name run1 \
        --log acks.jsonl --transcript transcript.jsonl

It registers a model, then drives ``--sessions`` sessions at once with the evaluator runner
(:class:`clients.runner.runner.Runner`), whose SDK client is instrumented to write one JSON
line per event to ``--log`` (flushed at once, so the orchestrator can follow the run):

* ``ack``: an answer the server acknowledged (``submit_answer`` returned): session, position,
  item, whether the SDK saw it as already committed by an earlier attempt, wall time;
* ``call``: one ``next`` or ``answer`` call of the runner, retries included (start, seconds,
  whether it succeeded);
* ``attempt``: one HTTP attempt (path kind, status or transport error, seconds);
* ``done``: the runner's summary (the last line).

Exit status 0 when every session finished, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import IO, Any

import httpx

from clients.llm.chat import ChatClient, ChatEndpoint
from clients.runner.runner import RunConfig, Runner, summary_json
from clients.runner.transcript import Transcript
from clients.sdk import Accepted, AsyncProctorClient, FinishReason, Item, Usage
from clients.sdk._core import IdLike


class EventLog:
    """JSON lines, each flushed as written."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, event: str, **fields: Any) -> None:
        self._stream.write(json.dumps({"event": event, **fields}) + "\n")
        self._stream.flush()


def path_kind(path: str) -> str:
    """``next``, ``answer`` or ``other``: what an API path is for the figures."""
    if path.endswith("/next"):
        return "next"
    if path.endswith("/answers"):
        return "answer"
    return "other"


class TimedTransport(httpx.AsyncBaseTransport):
    """httpx's transport, logging every attempt with its status or transport error."""

    def __init__(self, log: EventLog) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._log = log

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        started, wall = time.monotonic(), time.time()
        kind = path_kind(request.url.path)
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.TransportError as error:
            self._log.write(
                "attempt",
                kind=kind,
                error=type(error).__name__,
                t=wall,
                dur=time.monotonic() - started,
            )
            raise
        self._log.write(
            "attempt",
            kind=kind,
            status=response.status_code,
            t=wall,
            dur=time.monotonic() - started,
        )
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class LoggedClient(AsyncProctorClient):
    """The SDK client the runner drives, logging its ``next`` and ``answer`` calls and every
    acknowledged answer."""

    def __init__(self, base_url: str, api_key: str, log: EventLog) -> None:
        super().__init__(base_url, api_key, transport=TimedTransport(log))
        self._log = log

    async def next_item(self, session_id: IdLike) -> Item | None:
        started, wall = time.monotonic(), time.time()
        ok = False
        try:
            item = await super().next_item(session_id)
            ok = True
            return item
        finally:
            self._log.write("call", kind="next", t=wall, dur=time.monotonic() - started, ok=ok)

    async def submit_answer(
        self,
        session_id: IdLike,
        item: Item,
        answer: str,
        *,
        reasoning: str | None = None,
        usage: Usage | None = None,
        finish_reason: FinishReason | None = None,
        model_latency_s: float | None = None,
    ) -> Accepted:
        started, wall = time.monotonic(), time.time()
        ok = False
        try:
            accepted = await super().submit_answer(
                session_id,
                item,
                answer,
                reasoning=reasoning,
                usage=usage,
                finish_reason=finish_reason,
                model_latency_s=model_latency_s,
            )
            ok = True
        finally:
            self._log.write("call", kind="answer", t=wall, dur=time.monotonic() - started, ok=ok)
        self._log.write(
            "ack",
            session=str(session_id),
            position=item.position,
            item_id=str(item.item_id),
            already=accepted.already_answered,
            t=time.time(),
        )
        return accepted


async def drive(args: argparse.Namespace, log: EventLog) -> dict[str, object]:
    """Register a model and drive the sessions; the runner's summary."""
    endpoint = ChatEndpoint(base_url=args.endpoint, model=args.model)
    async with (
        LoggedClient(args.server, args.key, log) as client,
        ChatClient(endpoint, concurrency=args.sessions) as model,
    ):
        registered = await client.register_model(name=args.name, api_snapshot="multihost")
        log.write("model", model_id=str(registered.id), t=time.time())
        config = RunConfig(
            model_id=str(registered.id),
            sessions=args.sessions,
            concurrency=args.sessions,
            n_items=args.items,
        )
        with Transcript(Path(args.transcript)) as transcript:
            summary = await Runner(client, model, config, transcript).run()
    return summary_json(summary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--sessions", type=int, required=True)
    parser.add_argument("--items", type=int, required=True)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--transcript", required=True)
    args = parser.parse_args(argv)
    with open(args.log, "a", encoding="utf-8") as stream:
        log = EventLog(stream)
        log.write("start", t=time.time())
        summary = asyncio.run(drive(args, log))
        log.write("done", summary=summary, t=time.time())
    failed = summary["failed"]
    return 0 if failed == 0 and summary["finished"] == args.sessions else 1


if __name__ == "__main__":
    sys.exit(main())
