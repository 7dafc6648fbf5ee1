"""Render docs/configuration.md from the fields of :class:`server.config.Settings`.

Run ``python scripts/gen_config_docs.py`` after adding or changing a setting; tests/test_docs.py
fails while the committed page differs from what this renders. Each row shows the variable,
its type and bounds, its default and its description (the field's docstring). A secret's
value is never shown, only whether it is generated or required.
"""

from __future__ import annotations

import json
import re
import sys
import types
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from server.config import JudgeEndpoint, Settings  # noqa: E402

PAGE = REPO / "docs" / "configuration.md"

INTRO = """\
# Configuration

Proctor reads its settings from environment variables prefixed `PROCTOR_`, and from a
`.env` file in the working directory (the environment wins). Lists are JSON, e.g.
`PROCTOR_JUDGES='[{"name": "gpt-4o-2024-11-20", "base_url": "https://api.openai.com/v1",
"model": "gpt-4o-2024-11-20"}]'`. A value of the wrong type or out of range is refused
when the settings are first read, naming the setting (in lower case, without the prefix).

The embedded default needs none of them: SQLite under `PROCTOR_DATA_DIR`, in-process
stand-ins for Redis, a generated signing secret. For PostgreSQL set at least
`PROCTOR_DATABASE_URL`, `PROCTOR_MIGRATION_DATABASE_URL`, `PROCTOR_REDIS_URL` and
`PROCTOR_JWT_SECRET` (see [operators.md](operators.md)).

<!-- Generated from server/config.py by scripts/gen_config_docs.py: edit the field
docstrings there, then run `python scripts/gen_config_docs.py`. -->
"""

OUTRO = """\
The embedded SQLite database migrates itself on first use; for PostgreSQL run
`PROCTOR_DATABASE_URL=... proctor db upgrade` once per release.
"""

DISPLAYED_DEFAULTS: dict[str, str] = {
    "data_dir": "`$XDG_DATA_HOME/proctor`, else `~/.local/share/proctor`",
    "database_url": "embedded: `sqlite+aiosqlite:///$PROCTOR_DATA_DIR/proctor.db`",
    "migration_database_url": "unset: migrations run as `PROCTOR_DATABASE_URL`",
    "redis_url": "unset: in-process stand-ins",
    "jwt_secret": "(generated) on the embedded default; required with PostgreSQL",
    "audit_spool_dir": "`$PROCTOR_DATA_DIR/audit-spool`",
    "scoring_in_process": "yes without Redis, no with it",
    "trusted_proxies": "unset: the peer address is the client",
}
"""Defaults that depend on the machine or on other settings, in words."""

_BOUNDS: tuple[tuple[type[Any], str, str], ...] = (
    (annotated_types.Gt, "gt", ">"),
    (annotated_types.Ge, "ge", "≥"),
    (annotated_types.Lt, "lt", "<"),
    (annotated_types.Le, "le", "≤"),
    (annotated_types.MinLen, "min_length", "length ≥"),
    (annotated_types.MaxLen, "max_length", "length ≤"),
)


def markdown(text: str) -> str:
    """One table cell from a docstring: one line, ``rst literals`` as `code`, pipes escaped."""
    one_line = " ".join(text.split())
    return re.sub(r"``(.+?)``", r"`\1`", one_line).replace("|", "\\|")


def type_name(annotation: Any) -> str:
    """A reader's name for a field's type: ``int``, ``path``, ``JSON list of ...``, choices."""
    origin = get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{choice}`" for choice in get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " \\| ".join(f"`{member.value}`" for member in annotation)
    if origin in (Union, types.UnionType):
        present = [arg for arg in get_args(annotation) if arg is not type(None)]
        return " or ".join(type_name(arg) for arg in present) + ", optional"
    if origin is list:
        (item,) = get_args(annotation)
        return f"JSON list of {type_name(item)}"
    names = {Path: "path", SecretStr: "secret", JudgeEndpoint: "judge (below)"}
    if annotation in names:
        return names[annotation]
    return str(getattr(annotation, "__name__", annotation))


def bounds(field: FieldInfo) -> str:
    """The field's numeric and length constraints, e.g. ``≥ 30, ≤ 86400``."""
    found = []
    for constraint in field.metadata:
        for kind, attribute, symbol in _BOUNDS:
            if isinstance(constraint, kind):
                found.append(f"{symbol} {getattr(constraint, attribute)}")
    return ", ".join(found)


def _is_secret(annotation: Any) -> bool:
    return annotation is SecretStr or SecretStr in get_args(annotation)


def default_text(name: str, field: FieldInfo) -> str:
    """The default as shown: words for derived ones, never a secret, JSON for lists."""
    if name in DISPLAYED_DEFAULTS:
        return DISPLAYED_DEFAULTS[name]
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        factory: Callable[[], Any] = field.default_factory  # type: ignore[assignment]
        value = factory()
    else:
        value = field.default
    if isinstance(value, Enum):
        value = value.value
    if _is_secret(field.annotation):
        return "unset" if value is None else "(secret)"
    if value is None or value == "":
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list | tuple | dict):
        return f"`{json.dumps(value, separators=(',', ':'))}`"
    if isinstance(value, int | float | str):
        return f"`{value}`"
    raise ValueError(f"{name}: default {value!r} needs an entry in DISPLAYED_DEFAULTS")


def rows(model: type[BaseModel], label: Callable[[str], str]) -> list[str]:
    """One Markdown table row per field of ``model``, in declaration order.

    Raises ValueError naming every field without a description (docstring).
    """
    undocumented = [name for name, field in model.model_fields.items() if not field.description]
    if undocumented:
        raise ValueError(f"{model.__name__}: fields without a docstring: {undocumented}")
    lines = []
    for name, field in model.model_fields.items():
        kind = type_name(field.annotation)
        limits = bounds(field)
        kind_cell = f"{kind}; {limits}" if limits else kind
        assert field.description is not None
        lines.append(
            f"| `{label(name)}` | {kind_cell} | {markdown(default_text(name, field))} "
            f"| {markdown(field.description)} |"
        )
    return lines


def render() -> str:
    """The whole of docs/configuration.md."""
    header = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    settings = rows(Settings, lambda name: f"PROCTOR_{name.upper()}")
    judge_header = ["| key | type | default | meaning |", "|---|---|---|---|"]
    judge = rows(JudgeEndpoint, lambda name: name)
    parts = [
        INTRO,
        "## Variables\n",
        "\n".join([*header, *settings]) + "\n",
        "## A judge in `PROCTOR_JUDGES`\n",
        "Each entry of the JSON list is an object with these keys.\n",
        "\n".join([*judge_header, *judge]) + "\n",
        OUTRO,
    ]
    return "\n".join(parts)


def main() -> None:
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO)}")


if __name__ == "__main__":
    main()
