"""The ``proctor`` command: one module per command group, each exposing ``register(root)``
(:mod:`server.cli.groups`); ``main`` assembles them."""
