"""The models and judges the stand-in provider serves, and the JSON file that adds more.

A ``ModelProfile`` is either a *model* (answers exam questions correctly with a configured
probability, per discipline) or a *judge* (grades answers on the fig. 11 0-3 rubric from
the reference answer in our judge prompt). ``BUILTIN_PROFILES`` holds the named ones;
``load_profiles`` reads a JSON file that adds profiles or overrides fields of existing ones.

Profile file format: an object mapping profile names to their fields, or a list of objects
that each carry a ``name``::

    {
      "model-law": {"accuracy": 0.5, "discipline_accuracy": {"law": 0.95}},
      "model-strong": {"think": "field"},
      "judge-harsh": {"role": "judge", "noise": 0.4}
    }

Fields of a profile that already exists (built in, or earlier in the file) keep their value
unless the file sets them; a new profile starts from the defaults below.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, get_args

Role = Literal["model", "judge"]
Think = Literal["none", "inline", "field"]
Behaviour = Literal["normal", "strict", "echo", "garbled-once", "garbled"]
NoiseMode = Literal["middle", "uniform"]
ReplyMode = Literal["answer", "empty", "endless"]

ROLES: tuple[str, ...] = get_args(Role)
THINKS: tuple[str, ...] = get_args(Think)
BEHAVIOURS: tuple[str, ...] = get_args(Behaviour)
NOISE_MODES: tuple[str, ...] = get_args(NoiseMode)
REPLY_MODES: tuple[str, ...] = get_args(ReplyMode)
STATUS_FIELDS = ("overflow_status", "reject_status")


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """One model name the server answers as, and how it answers."""

    name: str
    role: Role = "model"
    accuracy: float = 0.5
    """Probability of a correct answer in a discipline not listed in ``discipline_accuracy``."""
    discipline_accuracy: Mapping[str, float] = field(default_factory=dict)
    """Accuracy per discipline; keys are compared case-insensitively (``casefold``)."""
    think: Think = "none"
    """``inline``: a ``<think>...</think>`` trace before the answer in ``content``;
    ``field``: the trace in ``message.reasoning_content``; ``none``: no trace."""
    noise: float = 0.0
    """Judges: probability that a rating is disturbed (how: ``noise_mode``)."""
    noise_mode: NoiseMode = "middle"
    """Judges: ``middle`` moves a disturbed rating by one toward the middle (3→2, 0→1);
    ``uniform`` replaces it with a rating drawn uniformly from 0-3 (which may be the same).
    Only ``uniform`` noise can push a quadratic-weighted kappa far down: off-by-one
    errors cost little under quadratic weights."""
    behaviour: Behaviour = "normal"
    """Judges: ``normal``; ``strict`` (a free-text answer must be the reference, not merely
    contain it: a judge that disagrees with ``normal`` ones on explained answers);
    ``echo`` (repeats the user message, then its verdict);
    ``garbled-once`` (prose without a rating, unless the request carries our format
    reminder); ``garbled`` (never a rating)."""
    latency_ms: float | None = None
    """Delay before this profile's replies; None: the server's ``latency_ms`` (a slow model
    next to a fast judge is how real providers behave)."""
    context_tokens: int | None = None
    """The context the prompt and the reply share (``fakellm.limits``); None: unbounded."""
    overflow_status: int = 400
    """The status of a prompt longer than the context: 400 ``context_length_exceeded``
    (OpenAI), or 500 (llama.cpp's server)."""
    reject_status: int | None = None
    """Refuse every request with this status (a permanent limit, e.g. 400)."""
    reply_mode: ReplyMode = "answer"
    """``answer``; ``empty`` (an empty reply); ``endless`` (rambles until ``max_tokens``
    or the context stops it)."""

    def accuracy_for(self, discipline: str | None) -> float:
        """The probability of a correct answer to a question of ``discipline``."""
        if discipline is not None:
            wanted = discipline.casefold().strip()
            for key, value in self.discipline_accuracy.items():
                if key.casefold().strip() == wanted:
                    return value
        return self.accuracy


def _model(name: str, accuracy: float, think: Think = "none", **by: float) -> ModelProfile:
    disciplines = {key.replace("_", " "): value for key, value in by.items()}
    return ModelProfile(name=name, accuracy=accuracy, discipline_accuracy=disciplines, think=think)


def _judge(name: str, noise: float = 0.0, behaviour: Behaviour = "normal") -> ModelProfile:
    return ModelProfile(name=name, role="judge", accuracy=1.0, noise=noise, behaviour=behaviour)


BUILTIN_PROFILES: dict[str, ModelProfile] = {
    profile.name: profile
    for profile in (
        _model("model-strong", 0.85, law=0.55, history=0.65, chinese=0.6),
        _model("model-mid", 0.6, math=0.4, mathematics=0.4, physics=0.45, biology=0.75),
        _model("model-weak", 0.3, other=0.45, English=0.5),
        _model("model-thinker", 0.75, "inline", math=0.9, mathematics=0.9, physics=0.85),
        _model("model-reasoner", 0.7, "field", law=0.4, computer_science=0.9),
        _judge("judge"),
        _judge("judge-noisy", noise=0.2),
        _judge("judge-strict", behaviour="strict"),
        _judge("judge-echo", behaviour="echo"),
        _judge("judge-garbled-once", behaviour="garbled-once"),
        _judge("judge-garbled", behaviour="garbled"),
        # what real inference servers do (fakellm.limits)
        replace(_model("model-tiny-context", 0.5), context_tokens=16, overflow_status=500),
        replace(_model("model-rambler", 0.5), reply_mode="endless"),
        replace(_model("model-silent", 0.5), reply_mode="empty"),
        replace(_judge("judge-rejecting"), reject_status=400),
        replace(_judge("judge-endless"), reply_mode="endless"),
    )
}
"""The profiles served without a ``--profiles`` file."""


class ProfileError(ValueError):
    """An invalid profile file; ``str()`` is ``file: profile.field: what is wrong``."""


_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(ModelProfile))


def load_profiles(
    path: str | Path, base: Mapping[str, ModelProfile] | None = None
) -> dict[str, ModelProfile]:
    """``base`` (default: the built-ins) with the profiles of the JSON file ``path`` added.

    Raises
    ------
    ProfileError
        The file cannot be read, is not JSON, or a profile has an unknown or invalid field;
        the message names the file, the profile and the field.
    """
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"{where}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{where}: not JSON: {exc.msg} (line {exc.lineno})") from None
    return merge_profiles(data, base, where=where)


def merge_profiles(
    data: object, base: Mapping[str, ModelProfile] | None = None, *, where: str = "<profiles>"
) -> dict[str, ModelProfile]:
    """``base`` (default: the built-ins) with the parsed profile document ``data`` applied."""
    profiles = dict(BUILTIN_PROFILES if base is None else base)
    for name, raw in _entries(data, where):
        profiles[name] = _apply(profiles.get(name), name, raw, where)
    return profiles


def _entries(data: object, where: str) -> Iterable[tuple[str, dict[str, Any]]]:
    if isinstance(data, dict):
        for name, raw in data.items():
            if not isinstance(raw, dict):
                raise ProfileError(f"{where}: {name}: must be an object of profile fields")
            yield _check_name(name, where), {k: v for k, v in raw.items() if k != "name"}
    elif isinstance(data, list):
        for index, raw in enumerate(data):
            if not isinstance(raw, dict):
                raise ProfileError(f"{where}: [{index}]: must be an object of profile fields")
            if "name" not in raw:
                raise ProfileError(f"{where}: [{index}].name: missing")
            name = _check_name(raw["name"], f"{where}: [{index}]")
            yield name, {k: v for k, v in raw.items() if k != "name"}
    else:
        raise ProfileError(
            f"{where}: must be an object mapping profile names to fields, or a list of profiles"
        )


def _check_name(name: object, where: str) -> str:
    if not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name):
        raise ProfileError(f"{where}: name: {name!r} is not a non-empty name without spaces")
    return name


def _apply(
    current: ModelProfile | None, name: str, raw: dict[str, Any], where: str
) -> ModelProfile:
    profile = current or ModelProfile(name=name)
    changes: dict[str, Any] = {}
    for key, value in raw.items():
        at = f"{where}: {name}.{key}"
        if key not in _FIELD_NAMES:
            known = ", ".join(n for n in _FIELD_NAMES if n != "name")
            raise ProfileError(f"{at}: unknown field (known: {known})")
        if key in ("accuracy", "noise"):
            changes[key] = _probability(value, at)
        elif key == "latency_ms":
            changes[key] = _milliseconds(value, at)
        elif key == "context_tokens":
            changes[key] = None if value is None else _count(value, at)
        elif key in STATUS_FIELDS:
            changes[key] = None if value is None and key == "reject_status" else _status(value, at)
        elif key == "discipline_accuracy":
            if not isinstance(value, dict):
                raise ProfileError(f"{at}: must be an object mapping disciplines to accuracies")
            changes[key] = {
                str(discipline): _probability(p, f"{at}.{discipline}")
                for discipline, p in value.items()
            }
        else:
            allowed = {
                "role": ROLES,
                "think": THINKS,
                "behaviour": BEHAVIOURS,
                "noise_mode": NOISE_MODES,
                "reply_mode": REPLY_MODES,
            }[key]
            if value not in allowed:
                raise ProfileError(f"{at}: {value!r} is not one of {', '.join(allowed)}")
            changes[key] = value
    updated = replace(profile, **changes)
    if updated.role == "model" and updated.behaviour != "normal":
        raise ProfileError(
            f"{where}: {name}.behaviour: only judges can be {updated.behaviour!r}; "
            "a model's behaviour is 'normal'"
        )
    return updated


def _count(value: object, at: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ProfileError(f"{at}: must be a whole number of at least 1")
    return value


def _status(value: object, at: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 400 <= value <= 599:
        raise ProfileError(f"{at}: must be an HTTP error status (400-599)")
    return value


def _milliseconds(value: object, at: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProfileError(f"{at}: {value!r} is not a number")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ProfileError(f"{at}: {value!r} is not a delay of 0 or more milliseconds")
    return number


def _probability(value: object, at: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProfileError(f"{at}: {value!r} is not a number")
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise ProfileError(f"{at}: {value!r} is not between 0 and 1")
    return number
