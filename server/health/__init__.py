"""Bank health on the server: snapshots from the verdicts, the scheduled job, the API."""
