"""The endpoint form of a model's page: save, check and remove how the server calls the
model, through the services the API's routes use (``server.model_endpoints``).

Who may: whoever may write models (vendors and evaluators for their organisation, admins
for any); others see the endpoint without the form. A secret header's value is typed into
a password field, sealed by the service and never shown again, nor put back into the
form when the page comes back with an error.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from starlette.datastructures import FormData

from server.api.dependencies import DbSession, RuntimeDep
from server.auth.console_logins import ConsoleUser
from server.auth.permissions import Permission
from server.console.dependencies import CheckedForm, page
from server.console.pages.models import render_model
from server.model_endpoints import service
from server.model_endpoints.calls import check_endpoint
from server.model_endpoints.schemas import EndpointIn

router = APIRouter(include_in_schema=False)
NAV = None
"""Part of the model's page: no menu entry of its own."""

Writer = Annotated[ConsoleUser, page(Permission.MODELS_WRITE)]
FIELDS = (
    "base_url",
    "model",
    "api",
    "template",
    "paradigm",
    "adapter",
    "system_prompt",
    "temperature",
    "max_tokens",
    "connect_timeout_s",
    "read_timeout_s",
    "concurrency",
    "requests_per_minute",
    "tokens_per_minute",
    "usd_per_mtok_in",
    "usd_per_mtok_out",
)
"""The form's fields that go to the body as they are typed (a blank one is left out: the
server's default)."""
SECRET_NAME, SECRET_VALUE, CLEAR_SECRETS = "secret_name", "secret_value", "clear_secrets"
DEFAULT_SECRET_HEADER = "Authorization"


def entered_values(form: FormData) -> dict[str, str]:
    """What the user typed, to show back in the form (never the secret's value)."""
    names = (*FIELDS, "stop", SECRET_NAME)
    return {name: str(form.get(name) or "").strip() for name in names}


def endpoint_body(form: FormData) -> dict[str, Any]:
    """The ``PUT .../endpoint`` body the form stands for: blank fields left out, one stop
    sequence per line, and a typed secret replacing the stored ones (``clear_secrets``
    removing them; neither: they stay). ``ValueError`` naming a field holding NUL."""
    for name, value in form.multi_items():
        if isinstance(value, str) and "\x00" in value:
            # the JSON guard refuses NUL for the API; a form is checked here
            raise ValueError(f"{name[:40]}: contains a NUL character")
    entered = entered_values(form)
    body: dict[str, Any] = {name: entered[name] for name in FIELDS if entered[name]}
    body["stop"] = [line for line in str(form.get("stop") or "").splitlines() if line.strip()]
    secret = str(form.get(SECRET_VALUE) or "")
    if form.get(CLEAR_SECRETS):
        body["secret_headers"] = {}
    elif secret:
        body["secret_headers"] = {entered[SECRET_NAME] or DEFAULT_SECRET_HEADER: secret}
    return body


def problems(error: ValidationError) -> str:
    """One line per refused field, naming it: the message only (pydantic's input value
    would echo what was typed, the secret included)."""
    lines = []
    for problem in error.errors():
        field = ".".join(str(part) for part in problem["loc"]) or "form"
        lines.append(f"{field}: {problem['msg']}")
    return "; ".join(lines)


@router.post("/console/models/{model_id}/endpoint", response_model=None)
async def save_endpoint(
    request: Request,
    model_id: uuid.UUID,
    db: DbSession,
    runtime: RuntimeDep,
    user: Writer,
    form: CheckedForm,
) -> Response:
    """Save the endpoint (replacing the model's); 303 back to the page, or the page with
    each refused field (422) and the values typed, the secret left out."""
    try:
        body = EndpointIn.model_validate(endpoint_body(form))
    except (ValidationError, ValueError) as error:
        return await render_model(
            request,
            db,
            runtime,
            user,
            model_id,
            status_code=422,
            error=problems(error) if isinstance(error, ValidationError) else str(error),
            entered=entered_values(form),
        )
    await service.set_endpoint(db, principal=user.principal, model_id=model_id, endpoint=body)
    return RedirectResponse(f"/console/models/{model_id}?notice=endpoint-saved", status_code=303)


@router.post("/console/models/{model_id}/endpoint/check", response_class=HTMLResponse)
async def check(
    request: Request,
    model_id: uuid.UUID,
    db: DbSession,
    runtime: RuntimeDep,
    user: Writer,
    form: CheckedForm,
) -> HTMLResponse:
    """Have the server call the endpoint once; the page with the outcome (secrets
    redacted)."""
    record = await service.get_endpoint(db, principal=user.principal, model_id=model_id)
    outcome = await check_endpoint(record, runtime.settings)
    return await render_model(request, db, runtime, user, model_id, check=outcome)


@router.post("/console/models/{model_id}/endpoint/delete", response_model=None)
async def remove_endpoint(
    model_id: uuid.UUID, db: DbSession, user: Writer, form: CheckedForm
) -> Response:
    """Remove the endpoint and its secrets; 303 back to the page."""
    await service.delete_endpoint(db, principal=user.principal, model_id=model_id)
    return RedirectResponse(f"/console/models/{model_id}?notice=endpoint-removed", status_code=303)
