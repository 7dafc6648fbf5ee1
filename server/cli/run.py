"""``proctor run``: the evaluator runner (:mod:`clients.runner.cli`), which must not import
the server, joins the ``proctor`` command here."""

from __future__ import annotations

from clients.runner.cli import run_command
from server.cli.groups import command_registrar

register = command_registrar(
    "run",
    run_command,
    "proctor run --server https://proctor.example.org --model-id MODEL_ID "
    "--endpoint http://localhost:8000/v1 --model my-model",
)
