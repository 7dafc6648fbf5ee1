"""``python -m fakellm serve ...``: the same as ``proctor fake-llm serve ...``."""

from fakellm.cli import fake_llm_app

fake_llm_app(prog_name="fakellm")
