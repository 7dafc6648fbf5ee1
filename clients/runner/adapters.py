"""The model-adapter layer (ReLE, "ReLE: A Scalable System and Structured Benchmark for
Diagnosing Capability Anisotropy in Chinese LLMs", §3.1): one prompt content, each model's
native form.

ReLE keeps the semantic content of a prompt fixed and lets a per-model adapter map it into
what the model expects, so that scores measure capability rather than template mismatch;
for reasoning models the adapter also separates the reasoning trace from the answer.

An adapter here decides

* the **messages** sent to an OpenAI-compatible chat endpoint: whether a system prompt is
  sent, and as a system message or folded into the user turn (models without a system
  role, or whose providers advise against one), plus a reasoning switch some models read
  from the prompt (Qwen3's ``/think`` and ``/no_think``);
* the **chat template** when the endpoint serves raw text completions (a base model, or an
  engine without the model's template): :func:`render_template` writes the messages in
  ChatML, Llama 3 or Alpaca form, sent to ``/completions`` (chat endpoints apply the
  model's own template themselves);
* how the **reply** splits into final answer and reasoning (:func:`split_reply`):
  an inline ``<think>`` block (DeepSeek-R1 and its distillations, QwQ) and/or a separate
  ``reasoning_content`` field (DeepSeek's API, vLLM's reasoning parsers).

Everything here is pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from judge.reasoning import split_reasoning

DEFAULT_SYSTEM_PROMPT = (
    "You are a knowledgeable assistant taking a university exam. Answer accurately and concisely."
)

Message = dict[str, str]
TemplateName = Literal["chatml", "llama3", "alpaca"]
TEMPLATES: tuple[str, ...] = get_args(TemplateName)


@dataclass(frozen=True, slots=True)
class ModelAdapter:
    """How one family of models wants its prompt.

    Attributes
    ----------
    name : str
    system_prompt : str or None
        Sent unless the caller gives another; None sends no system prompt.
    system_role : bool
        True: the system prompt is a ``system`` message. False: it is prepended to the user
        message (models without a system role).
    suffix : str
        Appended to the user message (a reasoning switch read from the prompt).
    """

    name: str
    system_prompt: str | None = DEFAULT_SYSTEM_PROMPT
    system_role: bool = True
    suffix: str = ""

    def messages(self, content: str, *, system_prompt: str | None = None) -> list[Message]:
        """The chat messages for prompt ``content``; ``system_prompt`` overrides the
        adapter's (an empty string sends none)."""
        system = self.system_prompt if system_prompt is None else (system_prompt or None)
        user = content + self.suffix
        if system is None:
            return [{"role": "user", "content": user}]
        if self.system_role:
            return [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return [{"role": "user", "content": f"{system}\n\n{user}"}]


ADAPTERS: dict[str, ModelAdapter] = {
    adapter.name: adapter
    for adapter in (
        ModelAdapter("openai"),
        # o1-style and Gemma models take no system role: fold it into the user turn.
        ModelAdapter("no-system", system_role=False),
        # DeepSeek recommends no system prompt for R1: every instruction in the user turn.
        ModelAdapter("deepseek-r1", system_prompt=None),
        ModelAdapter("qwen3-think", suffix=" /think"),
        ModelAdapter("qwen3-no-think", suffix=" /no_think"),
    )
}
"""Adapters by name; ``openai`` (system message + user message) is the default."""


def get_adapter(name: str) -> ModelAdapter:
    """The adapter called ``name``; ValueError naming the known ones otherwise."""
    try:
        return ADAPTERS[name]
    except KeyError:
        known = ", ".join(sorted(ADAPTERS))
        raise ValueError(f"unknown adapter {name!r}; known: {known}") from None


def render_template(template: TemplateName, messages: list[Message]) -> str:
    """``messages`` in a model's native chat template, ending where the model writes.

    * ``chatml``: ``<|im_start|>role\\n...<|im_end|>`` turns (Qwen, Yi, many fine-tunes);
    * ``llama3``: ``<|begin_of_text|>`` then ``<|start_header_id|>role<|end_header_id|>``
      turns closed by ``<|eot_id|>``;
    * ``alpaca``: the system prompt as preamble, ``### Instruction:`` and
      ``### Response:``.
    """
    if template == "chatml":
        turns = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages]
        return "".join(turns) + "<|im_start|>assistant\n"
    if template == "llama3":
        turns = [
            f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{m['content']}<|eot_id|>"
            for m in messages
        ]
        opener = "<|start_header_id|>assistant<|end_header_id|>\n\n"
        return "<|begin_of_text|>" + "".join(turns) + opener
    if template == "alpaca":
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        user = "\n\n".join(m["content"] for m in messages if m["role"] != "system")
        preamble = f"{system}\n\n" if system else ""
        return f"{preamble}### Instruction:\n{user}\n\n### Response:\n"
    raise ValueError(f"unknown template {template!r}; known: {', '.join(TEMPLATES)}")


def split_reply(content: str, reasoning: str | None = None) -> tuple[str, str | None]:
    """``(final answer, reasoning trace)`` of a model reply: inline ``<think>`` blocks are
    taken out of ``content`` and joined after a separate ``reasoning`` field."""
    final, inline = split_reasoning(content)
    parts = [part for part in (reasoning and reasoning.strip(), inline) if part]
    return final, "\n\n".join(parts) or None
