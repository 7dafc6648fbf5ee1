"""Deciding and writing the stand-in's replies (pure: no I/O, no clock, no global state).

Every random-looking choice is a deterministic hash (``uniform``) of the server's seed and
the request, so the same question to the same model always gets the same reply, and a
model's measured accuracy over many questions is a binomial sample around its profile.

*Models* answer from the ``KeyItem`` the prompt was matched to: right iff
``uniform(seed, model, question) < accuracy`` for the item's discipline. A right reply
states the reference (``The answer is C.``, ``True.``/``正确。``, or the reference text);
a wrong one states another letter, the flipped true/false, or a plausible wrong text.

*Judges* read our judge prompt (``judge.prompts.read_judge_request``) and grade from its
reference answer: 3 if the answer agrees with it, else 0, moved one step toward the middle
with probability ``noise``; the reply is in the fig. 11 format ``judge.verdict`` parses.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from fakellm.answer_key import OPTION_LETTERS, KeyItem
from fakellm.profiles import ModelProfile
from judge.prompts import JudgeInput, read_judge_request

Message = dict[str, str]

DONT_KNOW = "I'm sorry, but I don't know the answer to this question."
NOT_A_JUDGE_REQUEST = (
    "I can only grade requests written in the Proctor judge format; this request is not one."
)
GARBLED = (
    "Thank you for sharing this response. It raises several points worth discussing, and "
    "on reflection I find it hard to settle on a single judgement without more context "
    "about what the question intended."
)


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply's ``content`` and, for ``think="field"`` profiles, its reasoning trace."""

    content: str
    reasoning: str | None = None


# --------------------------------------------------------------------------- hashing


def uniform(*parts: object) -> float:
    """A deterministic number in [0, 1) from ``parts`` (SHA-256 of their text)."""
    text = "\x1f".join(str(part) for part in parts)
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def _pick(options: Sequence[str], *parts: object) -> str:
    return options[int(uniform(*parts) * len(options))]


def count_tokens(text: str) -> int:
    """The stand-in's token count: ``len(text) // 4``, at least 1."""
    return max(1, len(text) // 4)


# --------------------------------------------------------------------------- normalising


@functools.lru_cache(maxsize=65_536)
def normalise(text: str) -> str:
    """``text`` casefolded, without punctuation or whitespace (for containment checks).

    Cached: a wrong answer checks every decoy of its discipline, the same few thousand
    answers over and over (the demo's profile showed this loop first in the model server)."""
    return "".join(
        ch
        for ch in unicodedata.normalize("NFKC", text).casefold()
        if not ch.isspace() and not unicodedata.category(ch).startswith("P")
    )


_TRUE_WORDS = frozenset({"true", "正确"})
_FALSE_WORDS = frozenset({"false", "错误"})
_POLARITY_RE = re.compile(
    r"\b(?P<word>not correct|incorrect|false|true|correct|yes|no)\b"
    r"|(?P<zh>不正确|不对|错误|正确|错|对)",
    re.IGNORECASE,
)
_NEGATIVE = frozenset({"not correct", "incorrect", "false", "no", "不正确", "不对", "错误", "错"})
_LETTERS_RE = re.compile(r"^[A-Z]{1,26}$")
_STATED_LETTER_RES = (
    re.compile(
        r"(?i:answer)\s*(?i:is|:)?\s*(?i:option\s*)?[(\[]?(?P<letters>[A-Z]{1,8})[)\]]?(?![A-Za-z])"
    ),
    re.compile(r"答案\s*(?:是|为|:|：)?\s*[(（]?(?P<letters>[A-Z]{1,8})(?![A-Za-z])"),
    re.compile(r"^\s*[(\[]?(?P<letters>[A-Z]{1,8})[)\]]?[.:：。]?\s*$"),
    re.compile(r"^\s*[(\[]?(?P<letters>[A-Z])[)\].:：]"),
)


def letter_reference(reference: str) -> str | None:
    """The option letters ``reference`` names (``"C"``, ``"AC"``), or None if it is text.

    Several letters count only when distinct and in order, so ``"DNA"`` stays text.
    """
    ref = reference.strip()
    if not _LETTERS_RE.match(ref):
        return None
    if len(ref) > 1 and list(ref) != sorted(set(ref)):
        return None
    return ref


def polarity_reference(reference: str) -> bool | None:
    """True/False for a true-false reference (``True``/``正确``, ``False``/``错误``)."""
    ref = normalise(reference)
    if ref in _TRUE_WORDS:
        return True
    if ref in _FALSE_WORDS:
        return False
    return None


def stated_letters(answer: str) -> str | None:
    """The option letter(s) ``answer`` states (``The answer is C``, ``答案是C``, ``(C)``)."""
    for pattern in _STATED_LETTER_RES:
        found = pattern.search(answer)
        if found:
            return "".join(sorted(set(found["letters"])))
    return None


def stated_polarity(answer: str) -> bool | None:
    """The first true/false word of ``answer``: True, False, or None if there is none."""
    found = _POLARITY_RE.search(answer)
    if found is None:
        return None
    word = (found["word"] or found["zh"]).casefold()
    return word not in _NEGATIVE


def grade(judge_input: JudgeInput, *, strict: bool = False) -> int:
    """3 if the answer agrees with the reference, else 0.

    A letter reference is compared with the letter(s) the answer states, a true/false
    reference with the answer's polarity; any other reference agrees when its normalised
    text is contained in the normalised answer (``strict``: equals it).
    """
    letters = letter_reference(judge_input.reference)
    if letters is not None:
        return 3 if stated_letters(judge_input.answer) == letters else 0
    polarity = polarity_reference(judge_input.reference)
    if polarity is not None:
        return 3 if stated_polarity(judge_input.answer) is polarity else 0
    reference = normalise(judge_input.reference)
    answer = normalise(judge_input.answer)
    if strict:
        return 3 if reference and reference == answer else 0
    return 3 if reference and reference in answer else 0


# --------------------------------------------------------------------------- models


def is_correct(profile: ModelProfile, item: KeyItem, seed: int) -> bool:
    """Whether ``profile`` answers ``item`` correctly (deterministic in seed, model, question)."""
    draw = uniform(seed, profile.name, " ".join(item.question.split()))
    return draw < profile.accuracy_for(item.discipline)


def model_reply(
    profile: ModelProfile, item: KeyItem | None, seed: int, *, decoys: Sequence[str] = ()
) -> Reply:
    """The reply of model ``profile`` to the question of ``item`` (None: not in the key).

    ``decoys`` are other answers of the same discipline and type, material for a
    plausible wrong answer to a free-text question.
    """
    if item is None:
        return _with_thinking(profile, DONT_KNOW, "I do not recognise this question.")
    correct = is_correct(profile, item, seed)
    text = right_answer(item) if correct else wrong_answer(item, seed, profile.name, decoys)
    trace = (
        f"The question is about {item.discipline}. I recall the relevant facts, check each "
        "possibility against them, and keep the one that is consistent."
    )
    return _with_thinking(profile, text, trace)


def right_answer(item: KeyItem) -> str:
    """A reply stating the reference answer of ``item``."""
    letters = letter_reference(item.answer) if _is_choice(item) else None
    if letters is not None:
        return f"The answer is {letters}. It is the option consistent with the facts given."
    polarity = polarity_reference(item.answer)
    if polarity is not None:
        return _true_false(item, polarity)
    return item.answer


def wrong_answer(item: KeyItem, seed: int, model: str, decoys: Sequence[str] = ()) -> str:
    """A reply stating a plausible answer that a judge grading from the reference rejects."""
    letters = letter_reference(item.answer) if _is_choice(item) else None
    if letters is not None:
        count = max(len(item.options or ()), 4, OPTION_LETTERS.index(letters[-1]) + 1)
        others = [letter for letter in OPTION_LETTERS[:count] if letter != letters]
        wrong = _pick(others, seed, model, item.question, "letter")
        return f"The answer is {wrong}. It is the option consistent with the facts given."
    polarity = polarity_reference(item.answer)
    if polarity is not None:
        return _true_false(item, not polarity)
    reference = normalise(item.answer)
    candidates = [_perturb_number(item.answer)] if re.search(r"\d", item.answer) else []
    usable = [d for d in decoys if normalise(d) and normalise(d) != reference]
    if usable:
        candidates.append(_pick(usable, seed, model, item.question, "decoy"))
    candidates.extend(_GENERIC_WRONG)
    for candidate in candidates:
        if candidate and reference not in normalise(candidate):
            return candidate
    return "?"  # nothing left to contain the reference


_GENERIC_WRONG = (
    "It cannot be determined from the information given.",
    "None of the above.",
    "Unknown.",
    "42",
    "7",
)


def _is_choice(item: KeyItem) -> bool:
    single_letter = len(item.answer.strip()) == 1 and item.answer.strip() in OPTION_LETTERS
    return bool(item.options) or item.qtype == "multiple_choice" or single_letter


def _true_false(item: KeyItem, value: bool) -> str:
    if normalise(item.answer) in {"正确", "错误"}:  # answer in the reference's language
        return "正确。题干的说法与相关知识一致。" if value else "错误。题干的说法与相关知识不符。"
    if value:
        return "True. The statement is consistent with the relevant facts."
    return "False. The statement contradicts the relevant facts."


def _perturb_number(text: str) -> str:
    """``text`` with its first number changed (``12`` → ``13``, ``0.5`` → ``1.5``)."""

    def bump(found: re.Match[str]) -> str:
        digits = found.group(0)
        if "." in digits:
            whole, _, fraction = digits.partition(".")
            return f"{int(whole) + 1}.{fraction}"
        return str(int(digits) + 1)

    return re.sub(r"\d+(?:\.\d+)?", bump, text, count=1)


def _with_thinking(profile: ModelProfile, text: str, trace: str) -> Reply:
    if profile.think == "inline":
        return Reply(f"<think>\n{trace}\n</think>\n\n{text}")
    if profile.think == "field":
        return Reply(text, reasoning=trace)
    return Reply(text)


# --------------------------------------------------------------------------- judges

_REASONS = {
    "en": {
        3: "The response gives the correct answer, in agreement with the reference answer, "
        "and its explanation is reasonable.",
        2: "The response reaches the correct answer, but its explanation is only partially "
        "reasonable.",
        1: "The response's conclusion disagrees with the reference answer, although parts of "
        "its explanation are reasonable.",
        0: "The response's conclusion disagrees with the reference answer, and its "
        "explanation does not support a correct conclusion.",
    },
    "zh": {
        3: "回答与参考答案一致，解释合理。",
        2: "回答与参考答案一致，但解释只是部分合理。",
        1: "回答与参考答案不一致，但解释部分合理。",
        0: "回答与参考答案不一致，解释也不能支持正确的结论。",
    },
}


def verdict_text(rating: int, language: str = "en") -> str:
    """A fig. 11 verdict: ``"Overall Rating": N`` and the reason line."""
    reasons = _REASONS["zh" if language.lower().startswith("zh") else "en"]
    return f'"Overall Rating": {rating}\nThe reason why you gave this rating: {reasons[rating]}'


def has_reminder(messages: Sequence[Message]) -> bool:
    """Whether ``messages`` carry a retry: an assistant turn followed by a user turn."""
    seen_assistant = False
    for message in messages:
        if message.get("role") == "assistant":
            seen_assistant = True
        elif message.get("role") == "user" and seen_assistant:
            return True
    return False


def judge_reply(profile: ModelProfile, messages: list[Message], seed: int) -> Reply:
    """The reply of judge ``profile`` to ``messages`` (our judge prompt, perhaps with a
    format reminder)."""
    request = read_judge_request(messages)
    trace = "I compare the response's conclusion with the reference answer."
    if profile.behaviour == "garbled" or (
        profile.behaviour == "garbled-once" and not has_reminder(messages)
    ):
        return _with_thinking(profile, GARBLED, trace)
    if request is None:
        return _with_thinking(profile, NOT_A_JUDGE_REQUEST, trace)
    rating = grade(request, strict=profile.behaviour == "strict")
    canonical = json.dumps(messages, ensure_ascii=False, sort_keys=True)
    if profile.noise > 0 and uniform(seed, profile.name, canonical, "noise") < profile.noise:
        rating = _disturbed(profile, rating, uniform(seed, profile.name, canonical, "rating"))
    text = verdict_text(rating, request.language)
    if profile.behaviour == "echo":
        text = f"{_judged_user_message(messages)}\n\n{text}"
    return _with_thinking(profile, text, trace)


def _disturbed(profile: ModelProfile, rating: int, draw: float) -> int:
    """A disturbed rating: one step toward the middle, or uniform over 0-3 (``draw`` in
    [0, 1) picks it)."""
    if profile.noise_mode == "uniform":
        return min(3, int(draw * 4))
    return 1 if rating < 2 else 2


def _judged_user_message(messages: Sequence[Message]) -> str:
    """The user message holding the judge request (else the last user message)."""
    users = [m.get("content", "") for m in messages if m.get("role") == "user"]
    for content in users:
        if read_judge_request([{"role": "user", "content": content}]) is not None:
            return content
    return users[-1] if users else ""


# --------------------------------------------------------------------------- dispatch


def last_user_text(messages: Sequence[Message]) -> str:
    """The content of the last user message ('' if there is none)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return message.get("content", "")
    return ""
