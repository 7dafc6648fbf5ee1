"""``python -m server`` runs the ``proctor`` command."""

from server.cli.main import app

app(prog_name="proctor")
