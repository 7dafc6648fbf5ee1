"""``python -m server`` runs the ``proctor`` command."""

from server.cli import app

app(prog_name="proctor")
