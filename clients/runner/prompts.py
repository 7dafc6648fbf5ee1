"""Prompt templates for the evaluated model: the three paradigms of
LLMEval-Fair (Zhang et al., "LLMEval-Fair: A Large-Scale Longitudinal Study on Robust and
Fair Evaluation of Large Language Models", §3.2).

LLMEval-Fair evaluates every model zero-shot, few-shot (app. B, fig. 9) and with
chain-of-thought (fig. 10); the paradigm changes scores by under three points (Finding 3).
A template turns one delivered item into the *content* of the prompt (instruction, input
and constraints); how that content becomes the model's messages is the adapter's job
(:mod:`clients.runner.adapters`, ReLE §3.1).

Rendering is pure and deterministic. Chinese items (``language`` "zh", the bank's default
for GAOKAO-style items) get the Chinese wording, everything else English.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Paradigm = Literal["zero-shot", "few-shot", "cot"]
PARADIGMS: tuple[str, ...] = get_args(Paradigm)

OPTION_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True, slots=True)
class PromptItem:
    """What the runner knows of a delivered item (``clients.sdk.Item`` has these fields)."""

    question: str
    options: list[str] | None
    qtype: str
    discipline: str


@dataclass(frozen=True, slots=True)
class Example:
    question: str
    answer: str


# Fig. 9 shows worked examples of the bank's item types; ours follow its structure
# (a true/false statement with its reason, a term to explain, an open question).
_FEW_SHOT_EN: tuple[Example, ...] = (
    Example(
        "Please determine the correctness of the following statement. Answer with "
        "true/false and provide a reason. If all elements below the diagonal in the "
        "adjacency matrix of a directed graph are zero, then the graph must have a "
        "topological ordering.",
        "true. The graph has no edge from a later vertex to an earlier one, so it is a "
        "directed acyclic graph, and every directed acyclic graph has a topological "
        "ordering.",
    ),
    Example(
        "Please explain the following term: opportunity cost.",
        "The value of the best alternative given up when a choice is made; for example, "
        "the wage forgone by spending a year in full-time study.",
    ),
    Example(
        "Why can the results of animal experiments not be applied to clinical practice "
        "without analysis?",
        "Humans and animals differ in anatomy, metabolism and, above all, in the nervous "
        "system, so a disease reproduced in animals differs from the human disease; results "
        "must be compared with clinical data before they guide diagnosis or treatment.",
    ),
)
_FEW_SHOT_ZH: tuple[Example, ...] = (
    Example(
        "请判断下列说法是否正确，回答“正确”或“错误”并说明理由：若有向图邻接矩阵对角线以下的元素"
        "全为零，则该图一定存在拓扑序列。",
        "正确。此时图中没有从后面顶点指向前面顶点的边，图是有向无环图，有向无环图一定存在拓扑序列。",
    ),
    Example(
        "请解释下列名词：机会成本。",
        "作出一项选择时所放弃的其他选择中价值最高者的价值，例如脱产学习一年所放弃的工资收入。",
    ),
    Example(
        "为什么动物实验的结果不能不加分析地直接应用于临床？",
        "人与动物在形态、代谢，尤其是神经系统上存在本质差异，动物身上复制的疾病与人类疾病不同，"
        "实验结果必须与临床资料比较分析后才能作为诊治的参考。",
    ),
)


@dataclass(frozen=True, slots=True)
class _Wording:
    options: str
    answer_choice: str
    answer_true_false: str
    few_shot_intro: str
    few_shot_outro: str
    question: str
    answer: str
    cot: str


_EN = _Wording(
    options="Options:",
    answer_choice="Give the letter of the correct option first, then a brief reason.",
    answer_true_false="Answer with true or false first, then a brief reason.",
    few_shot_intro="Here are several examples:",
    few_shot_outro="The following is the question to be answered:",
    question="Question:",
    answer="Answer:",
    cot="Please think step by step and provide the final answer.",
)
_ZH = _Wording(
    options="选项：",
    answer_choice="请先给出正确选项的字母，再简要说明理由。",
    answer_true_false="请先回答“正确”或“错误”，再简要说明理由。",
    few_shot_intro="以下是几个示例：",
    few_shot_outro="下面是需要回答的问题：",
    question="问题：",
    answer="答案：",
    cot="请一步一步地思考，并给出最终答案。",
)


def _wording(language: str) -> _Wording:
    return _ZH if language.lower().startswith("zh") else _EN


def detect_language(text: str) -> str:
    """ "zh" when a fifth or more of the letters are CJK ideographs, else "en" (delivered
    items do not carry their language)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "en"
    cjk = sum(1 for c in letters if "\u4e00" <= c <= "\u9fff" or "\u3400" <= c <= "\u4dbf")
    return "zh" if cjk * 5 >= len(letters) else "en"


def item_text(item: PromptItem, language: str) -> str:
    """The question with its lettered options and the answer-format constraint."""
    words = _wording(language)
    parts = [item.question.strip()]
    if item.options:
        lines = [f"{OPTION_LETTERS[i]}. {text}" for i, text in enumerate(item.options)]
        parts.append("\n".join([words.options, *lines]))
        parts.append(words.answer_choice)
    elif item.qtype == "true_false":
        parts.append(words.answer_true_false)
    return "\n\n".join(parts)


def render(item: PromptItem, paradigm: Paradigm, *, language: str | None = None) -> str:
    """The prompt content for ``item`` under ``paradigm``.

    * zero-shot: the item itself;
    * few-shot (LLMEval-Fair fig. 9): three worked examples, then the item after
      "The following is the question to be answered";
    * cot (fig. 10): the item, then "Please think step by step and provide the final
      answer."

    ``language`` defaults to :func:`detect_language` of the question.
    """
    lang = language or detect_language(item.question)
    words = _wording(lang)
    body = item_text(item, lang)
    if paradigm == "zero-shot":
        return body
    if paradigm == "cot":
        return f"{body}\n\n{words.cot}"
    if paradigm == "few-shot":
        examples = _FEW_SHOT_ZH if lang.lower().startswith("zh") else _FEW_SHOT_EN
        shots = "\n\n".join(
            f"{words.question}\n{e.question}\n\n{words.answer}\n{e.answer}" for e in examples
        )
        return (
            f"{words.few_shot_intro}\n\n{shots}\n\n{words.few_shot_outro}\n\n"
            f"{words.question}{body}\n\n{words.answer}"
        )
    raise ValueError(f"unknown paradigm {paradigm!r}; known: {', '.join(PARADIGMS)}")
