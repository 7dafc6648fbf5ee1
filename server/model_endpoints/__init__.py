"""A model's endpoint: how the server calls the model it evaluates."""
