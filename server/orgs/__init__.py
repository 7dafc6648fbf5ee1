"""Organisations: the unit that owns models, sessions, keys and exposure."""
