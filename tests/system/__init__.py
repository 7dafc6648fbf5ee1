"""System tests: the whole server (and client) as a user or an attacker meets it."""
