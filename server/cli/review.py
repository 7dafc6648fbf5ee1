"""``proctor review``: work the human review queue over the server's API.

A reviewer is an outside expert with an API key (role ``reviewer``), not someone with the
database's password, so these commands talk to a running server over HTTP with
``--server`` and ``--api-key`` (as ``proctor run`` does), and see exactly what the key may
see: admins and reviewers every organisation's tasks, evaluators their own. Tables for
people, ``--json`` for scripts. A refusal of the server (403, 404, 409, 422) is printed as
``error: ...`` with exit status 1; a server that cannot be reached, status 1 as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import httpx
import typer
from rich.table import Table

from server.cli.groups import group, group_registrar
from server.cli.options import JsonFlag
from server.cli.output import fail, stdout, table_console
from server.cli.remote import ApiKey, ServerUrl
from server.review.schemas import MAX_REVIEW_NOTE
from server.review.states import ReviewReason

app = group(
    "review",
    "Work the human review queue: list, show, score, skip.",
    "proctor review list --server https://proctor.example.org",
    "proctor review score 12 3 --note 'complete and correct'",
)
register = group_registrar(app)

TaskId = Annotated[int, typer.Argument(min=1, help="The task id (from list).")]
TIMEOUT_S = 30.0


class ReviewApi:
    """The review routes of one server, as one API key (exchanged for a token once)."""

    def __init__(self, http: httpx.Client, api_key: str) -> None:
        self.http = http
        token = self._call("POST", "/v1/auth/token", json={"api_key": api_key})
        self.http.headers["Authorization"] = f"Bearer {token['access_token']}"

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path, **kwargs)
        if response.status_code >= 400:
            fail(refusal(response))
        return response.json()

    def tasks(self, params: dict[str, str | int]) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/v1/review/tasks", params=params)
        return result

    def task(self, task_id: int) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/v1/review/tasks/{task_id}")
        return result

    def score(self, task_id: int, score: int, note: str) -> dict[str, Any]:
        body = {"score": score, "note": note}
        result: dict[str, Any] = self._call("POST", f"/v1/review/tasks/{task_id}/score", json=body)
        return result

    def skip(self, task_id: int) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", f"/v1/review/tasks/{task_id}/skip")
        return result

    def agreement(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/v1/review/agreement")
        return result


def refusal(response: httpx.Response) -> str:
    """One line for a refused request: status, and the problem's title and detail."""
    try:
        problem = response.json()
    except ValueError:
        problem = None
    if isinstance(problem, dict):
        detail = problem.get("detail")
        if isinstance(detail, list):  # validation errors: the first one's message
            detail = "; ".join(str(e.get("msg", e)) for e in detail if isinstance(e, dict))
        title = problem.get("title", response.reason_phrase)
        return f"{response.status_code} {title}: {detail}"
    return f"{response.status_code} {response.reason_phrase}"


@contextmanager
def connected(server: str, api_key: str) -> Iterator[ReviewApi]:
    """A ``ReviewApi`` on ``server``; an unreachable server is ``error: ...``, status 1."""
    try:
        with httpx.Client(base_url=server.rstrip("/"), timeout=TIMEOUT_S) as http:
            yield ReviewApi(http, api_key)
    except httpx.HTTPError as error:
        fail(f"cannot reach {server}: {error}")


def print_json(document: Any) -> None:
    stdout.print_json(data=document)


@app.command("list")
def list_tasks(
    server: ServerUrl,
    api_key: ApiKey,
    reason: Annotated[
        ReviewReason | None, typer.Option("--reason", help="Only tasks of this reason.")
    ] = None,
    discipline: Annotated[
        str | None, typer.Option("--discipline", help="Only tasks of this discipline.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=500, help="Tasks to list.")] = 50,
    after: Annotated[
        int | None, typer.Option("--after", min=0, help="List tasks after this id.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """List open tasks you may score, oldest first."""
    params: dict[str, str | int] = {"limit": limit}
    if reason is not None:
        params["reason"] = reason.value
    if discipline is not None:
        params["discipline"] = discipline
    if after is not None:
        params["after"] = after
    with connected(server, api_key) as api:
        page = api.tasks(params)
    if as_json:
        print_json(page)
        return
    table = Table("task", "reason", "discipline", "type", "scores", "needed", "opened")
    for task in page["tasks"]:
        table.add_row(
            str(task["task_id"]),
            task["reason"],
            task["discipline"],
            task["qtype"],
            str(task["human_scores"]),
            str(task["required"]),
            task["created_at"][:19],
        )
    table_console().print(table)
    if page["next_after"] is not None:
        stdout.print(f"more: --after {page['next_after']}")


@app.command("show")
def show_task(
    task_id: TaskId, server: ServerUrl, api_key: ApiKey, as_json: JsonFlag = False
) -> None:
    """Show a task: question, reference, answer and the judges' reasons."""
    with connected(server, api_key) as api:
        task = api.task(task_id)
    if as_json:
        print_json(task)
        return
    console = table_console()
    console.print(
        f"task {task['task_id']} ({task['reason']}, {task['state']}): {task['discipline']} / "
        f"{task['subdiscipline']}, {task['qtype']}, {task['human_scores']} of "
        f"{task['required']} scores",
        markup=False,
    )
    sections = [
        ("question", task["question"]),
        ("options", "\n".join(task["options"]) if task["options"] else None),
        ("reference", task["reference"]),
        ("explanation", task["explanation"]),
        ("answer", task["answer"]),
        ("reasoning", task["reasoning"]),
    ]
    for title, text in sections:
        if text:
            console.print(f"\n{title}:", style="bold", markup=False)
            console.print(text, markup=False, highlight=False)
    judges = Table("judge", "score", "method", "reason")
    for verdict in task["judges"]:
        score = "-" if verdict["score"] is None else str(verdict["score"])
        judges.add_row(verdict["judge"], score, verdict["method"], verdict["reason"] or "")
    console.print()
    console.print(judges)
    if task["your_score"] is not None:
        console.print(f"your score: {task['your_score']}", markup=False)


@app.command("score")
def score_task(
    task_id: TaskId,
    score: Annotated[int, typer.Argument(min=0, max=3, help="0-3: 3 fully right, 0 wrong.")],
    server: ServerUrl,
    api_key: ApiKey,
    note: Annotated[str, typer.Option("--note", help="Why (kept with your score).")] = "",
    as_json: JsonFlag = False,
) -> None:
    """Score a task's answer 0-3 with a note."""
    if len(note) > MAX_REVIEW_NOTE:
        raise typer.BadParameter(f"at most {MAX_REVIEW_NOTE} characters", param_hint="--note")
    with connected(server, api_key) as api:
        result = api.score(task_id, score, note)
    if as_json:
        print_json(result)
        return
    stdout.print(
        f"task {result['task_id']}: scored {result['score']}; {result['human_scores']} of "
        f"{result['required']} scores, {result['state']}",
        markup=False,
    )


@app.command("skip")
def skip_task(
    task_id: TaskId, server: ServerUrl, api_key: ApiKey, as_json: JsonFlag = False
) -> None:
    """Pass on a task: it is not offered to you again."""
    with connected(server, api_key) as api:
        result = api.skip(task_id)
    if as_json:
        print_json(result)
        return
    stdout.print(f"task {result['task_id']}: skipped", markup=False)


def _interval(figure: dict[str, float | None]) -> str:
    if figure["estimate"] is None:
        return "-"
    if figure["low"] is None or figure["high"] is None:
        return f"{figure['estimate']:.3f}"
    return f"{figure['estimate']:.3f} [{figure['low']:.3f}, {figure['high']:.3f}]"


@app.command("agreement")
def agreement(server: ServerUrl, api_key: ApiKey, as_json: JsonFlag = False) -> None:
    """Reviewer and judge-vs-human agreement, kappas with 95% intervals."""
    with connected(server, api_key) as api:
        report = api.agreement()
    if as_json:
        print_json(report)
        return
    level = round(100 * report["confidence_level"])
    table = Table(
        "raters", "group", "n", "families", "exact", f"kappa [{level}%]", f"weighted [{level}%]"
    )
    rows = [("reviewers", report["reviewers"])]
    for breakdown in ("by_judge", "by_discipline", "by_model_family"):
        rows.extend((f"{row['judge']} vs people", row) for row in report[breakdown])
    for raters, row in rows:
        exact = "-" if row["exact"] is None else f"{row['exact']:.3f}"
        table.add_row(
            raters,
            row["group"] or "all",
            str(row["n"]),
            str(row["n_clusters"]),
            exact,
            _interval(row["kappa"]),
            _interval(row["weighted_kappa"]),
        )
    table_console().print(table)
