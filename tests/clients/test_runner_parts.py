"""The runner's pure parts: paradigm templates, the adapter layer and the transcript."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clients.runner.adapters import (
    ADAPTERS,
    DEFAULT_SYSTEM_PROMPT,
    get_adapter,
    render_template,
    split_reply,
)
from clients.runner.prompts import PromptItem, detect_language, render
from clients.runner.transcript import Transcript, read_lines, read_state

CHOICE = PromptItem(
    "Which gas makes up most of the air?",
    ["Oxygen", "Nitrogen", "Argon"],
    "multiple_choice",
    "Science",
)
OPEN_ZH = PromptItem("简述光合作用的意义。", None, "short_answer", "生物")


def test_zero_shot_is_the_item_with_lettered_options_and_the_answer_format() -> None:
    text = render(CHOICE, "zero-shot")
    assert text.startswith("Which gas makes up most of the air?")
    assert "A. Oxygen\nB. Nitrogen\nC. Argon" in text
    assert "Give the letter of the correct option first" in text


def test_cot_adds_the_fig10_instruction_after_the_item() -> None:
    text = render(CHOICE, "cot")
    assert text.endswith("Please think step by step and provide the final answer.")
    assert text.index("C. Argon") < text.index("step by step")


def test_few_shot_follows_fig9_examples_then_the_question() -> None:
    text = render(CHOICE, "few-shot")
    assert text.startswith("Here are several examples:")
    assert text.count("Question:") == 4 and text.endswith("Answer:")
    intro = text.index("The following is the question to be answered:")
    assert text.index("Which gas") > intro > text.index("opportunity cost")


def test_chinese_items_get_chinese_wording() -> None:
    assert detect_language(OPEN_ZH.question) == "zh" and detect_language(CHOICE.question) == "en"
    assert render(OPEN_ZH, "cot").endswith("请一步一步地思考，并给出最终答案。")
    few = render(OPEN_ZH, "few-shot")
    assert few.startswith("以下是几个示例：") and "机会成本" in few and "Question:" not in few


def test_true_false_items_ask_for_true_or_false() -> None:
    item = PromptItem("Water boils at 100 °C at sea level.", None, "true_false", "Science")
    assert "Answer with true or false first" in render(item, "zero-shot")


def test_unknown_paradigm_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown paradigm 'two-shot'"):
        render(CHOICE, "two-shot")  # type: ignore[arg-type]


def test_adapters_place_the_system_prompt_as_the_model_expects() -> None:
    assert get_adapter("openai").messages("Q") == [
        {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
        {"role": "user", "content": "Q"},
    ]
    folded = get_adapter("no-system").messages("Q")
    assert folded == [{"role": "user", "content": f"{DEFAULT_SYSTEM_PROMPT}\n\nQ"}]
    assert get_adapter("deepseek-r1").messages("Q") == [{"role": "user", "content": "Q"}]
    assert get_adapter("qwen3-think").messages("Q")[-1]["content"] == "Q /think"
    # the caller's system prompt replaces the adapter's; an empty one sends none
    assert (
        get_adapter("openai").messages("Q", system_prompt="Be brief.")[0]["content"] == "Be brief."
    )
    assert get_adapter("openai").messages("Q", system_prompt="") == [
        {"role": "user", "content": "Q"}
    ]
    with pytest.raises(ValueError, match="unknown adapter 'gpt'; known: "):
        get_adapter("gpt")
    assert "openai" in ADAPTERS


def test_split_reply_separates_inline_and_field_reasoning() -> None:
    assert split_reply("(B) Nitrogen") == ("(B) Nitrogen", None)
    assert split_reply("<think>air is 78% N2</think>(B) Nitrogen") == (
        "(B) Nitrogen",
        "air is 78% N2",
    )
    final, reasoning = split_reply("<think>second</think>B", "first")
    assert final == "B" and reasoning == "first\n\nsecond"
    assert split_reply("B", "  ") == ("B", None)


def test_transcript_survives_a_torn_line_and_knows_its_sessions(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with Transcript(path) as transcript:
        transcript.write("session", session_id="s1", model_id="m", n_items=3, adopted=False)
        transcript.write("item", session_id="s1", position=0, answer="B")
        transcript.write("item", session_id="s1", position=1, answer="C")
        transcript.write("session", session_id="s2", model_id="other", n_items=3, adopted=False)
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"event": "item", "session_id": "s1", "posi')  # a crash mid-line
    state = read_state(path, model_id="m")
    assert state.sessions == ["s1"] and state.answered == {"s1": 2}
    assert [line["event"] for line in read_lines(path)] == ["session", "item", "item", "session"]
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[1])["answer"] == "B"
    assert read_state(tmp_path / "missing.jsonl", model_id="m").sessions == []


def test_chat_templates_render_the_turns_natively() -> None:
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    assert render_template("chatml", messages) == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"
    )
    assert render_template("llama3", messages) == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert render_template("alpaca", messages) == "S\n\n### Instruction:\nQ\n\n### Response:\n"
    assert render_template("alpaca", messages[1:]) == "### Instruction:\nQ\n\n### Response:\n"
    with pytest.raises(ValueError, match="unknown template 'vicuna'"):
        render_template("vicuna", messages)  # type: ignore[arg-type]
