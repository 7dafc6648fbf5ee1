"""The ``proctor`` command: one module per command group; ``main`` assembles them."""
