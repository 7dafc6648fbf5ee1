"""A stand-in LLM provider: a real HTTP server speaking the OpenAI chat-completions protocol.

``proctor fake-llm serve`` runs it for tests, the demo and benchmarks in place of a paid
provider. It is an outside service (talk to it over HTTP), not a mock inside our code.

* ``fakellm.profiles``: the named models and judges it serves (``ModelProfile``).
* ``fakellm.answer_key``: the reference answers models answer from (``AnswerKey``).
* ``fakellm.behaviour``: pure functions deciding and writing the replies.
* ``fakellm.app``: the ASGI app (``create_app``) with its error injection and counters.
* ``fakellm.cli``: the ``serve`` command (``fake_llm_app``).
"""
