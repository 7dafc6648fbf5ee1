"""Checking a session bundle offline (pure: no database, no network).

``check_bundle(stream, public_key=...)`` reads a bundle (``server.bundles.format``) from a
binary stream and returns a ``BundleCheck`` listing every problem found, each as
``line N: field: what``. Hostile input (invalid UTF-8, NUL and other control bytes, lone
surrogate escapes, lines over ``MAX_LINE_BYTES``, deep nesting, huge numbers) gives a
problem, never an exception. It checks:

* every line is a canonical JSON object of a known type with exactly its fields;
* the lines come in the format's order, with one header, one commitment, one signature;
* answers and verdicts name delivered positions, answers the item delivered there;
* the commitment, when opened, names a sample source (``bank.sampling.source``) and
  recomputes (``bank.sampling.commitment``), and the delivered items sit at their
  committed positions (adaptive sessions: among them);
* the SHA-256 of the lines before the signature, and the Ed25519 signature against the
  public key the caller trusts, or, without one, the key the header names: that proves
  integrity only (anyone can sign a bundle with a key of their own), so ``intact`` may
  hold but ``ok`` never does without a trusted key (``origin_checked``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any

from bank.sampling.commitment import commitment as commitment_hash
from bank.sampling.source import SourceError, parse_source
from judge.rubric import MAX_SCORE, MIN_SCORE
from server.bundles import format as fmt
from server.errors import InvalidInput
from server.ledger.signing import PublicKey, parse_public
from server.sessions.modes import MODES
from server.sessions.states import SCORED_STATE_VALUES, SessionState

MAX_PROBLEMS = 1000
"""Problems kept in full; beyond them only counted."""
MAX_DEPTH = 16
"""Deepest nesting of arrays and objects accepted in a line (the format needs 4)."""
HEX = re.compile(r"[0-9a-f]+")
CONTROL = re.compile(rb"[\x00-\x1f\x7f]")
NON_ASCII = re.compile(rb"[\x80-\xff]")
SESSION_STATES = frozenset(state.value for state in SessionState)


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a bundle: where (line, field) and what."""

    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = [f"line {self.line}"] if self.line is not None else []
        if self.field:
            where.append(self.field)
        return ": ".join([*where, self.message])


@dataclass(slots=True)
class BundleCheck:
    """What checking a bundle found. ``intact`` if nothing is wrong and the signature
    verifies (against the trusted key, or else the key the bundle names: a forger signing
    with a key of their own passes that); ``origin_checked`` if it verifies against a key
    the caller trusted; ``ok`` (the verdict) only if both."""

    problems: list[Problem] = field(default_factory=list)
    n_problems: int = 0
    """All problems found, also those beyond ``MAX_PROBLEMS`` that were not kept."""
    n_lines: int = 0
    session_id: str | None = None
    state: str | None = None
    key_id: str | None = None
    """The key the signature line names."""
    sha256: str | None = None
    """The SHA-256 computed over the lines before the signature."""
    signature_valid: bool = False
    origin_checked: bool = False
    commitment: str | None = None
    commitment_revealed: bool = False
    commitment_valid: bool | None = None
    """Whether the opening recomputes to the commitment; None if it was not opened."""
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def intact(self) -> bool:
        """Nothing wrong and the signature verifies; says nothing of who signed."""
        return self.n_problems == 0 and self.signature_valid

    @property
    def ok(self) -> bool:
        """Intact and signed by the key the caller trusted: never without one."""
        return self.intact and self.origin_checked

    def add(self, line: int | None, field_name: str | None, message: str) -> None:
        self.n_problems += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(Problem(line, field_name, message))

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "intact": self.intact,
            "origin_checked": self.origin_checked,
            "signature_valid": self.signature_valid,
            "session_id": self.session_id,
            "state": self.state,
            "key_id": self.key_id,
            "sha256": self.sha256,
            "lines": self.n_lines,
            "counts": dict(self.counts),
            "commitment": self.commitment,
            "commitment_revealed": self.commitment_revealed,
            "commitment_valid": self.commitment_valid,
            "n_problems": self.n_problems,
            "problems": [
                {"line": p.line, "field": p.field, "message": p.message, "text": str(p)}
                for p in self.problems
            ],
        }


# --- field validators: each returns None or what is wrong --------------------------------

Validator = Callable[[Any], str | None]


def _string(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, not {_kind(value)}"
    return _text_problem(value)


def _text_problem(value: str) -> str | None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        return (
            f"holds a lone surrogate (\\u{ord(value[error.start]):04x}) at character {error.start}"
        )
    if "\x00" in value:
        return "holds a NUL character"
    return None


def _optional(check: Validator) -> Validator:
    return lambda value: None if value is None else check(value)


def _uuid(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"must be a UUID string, not {_kind(value)}"
    try:
        if str(uuid.UUID(value)) != value:
            return "must be a lowercase hyphenated UUID"
    except ValueError:
        return "is not a UUID"
    return None


def _hex(length: int) -> Validator:
    def check(value: Any) -> str | None:
        if not isinstance(value, str) or len(value) != length or not HEX.fullmatch(value):
            return f"must be {length} lowercase hex digits"
        return None

    return check


def _timestamp(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) != 27 or not value.endswith("Z"):
        return "must be a UTC time like 2026-01-02T03:04:05.000000Z"
    try:
        datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return "is not a valid time"
    return None


def _count(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
        return "must be a whole number from 0"
    return None


def _boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"must be true or false, not {_kind(value)}"


def _score(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_SCORE <= value <= MAX_SCORE:
        return "must be a whole number from 0 to 3"
    return None


def _strings(value: Any) -> str | None:
    if not isinstance(value, list):
        return f"must be a list of strings, not {_kind(value)}"
    for index, element in enumerate(value):
        problem = _string(element)
        if problem:
            return f"[{index}] {problem}"
    return None


def _uuids(value: Any) -> str | None:
    if not isinstance(value, list):
        return f"must be a list of UUIDs, not {_kind(value)}"
    for index, element in enumerate(value):
        problem = _uuid(element)
        if problem:
            return f"[{index}] {problem}"
    return None


def _object(value: Any) -> str | None:
    if not isinstance(value, dict):
        return f"must be an object, not {_kind(value)}"
    return _nested_text_problem(value)


def _source(value: Any) -> str | None:
    """An object that is a sample source (``bank.sampling.source.parse_source``)."""
    problem = _object(value)
    if problem:
        return problem
    try:
        parse_source(value)
    except SourceError as error:
        return str(error)
    return None


def _state(value: Any) -> str | None:
    return _string(value) or (None if value in SESSION_STATES else "is not a session state")


def _format(value: Any) -> str | None:
    return None if value == fmt.FORMAT else f"must be {fmt.FORMAT!r} (another format?)"


def _base64_key(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be base64 of a 32-byte key"
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return "is not base64"
    return None if len(raw) == 32 else "must be base64 of a 32-byte key"


def _literal(expected: str) -> Validator:
    return lambda value: None if value == expected else f"must be {expected!r}"


def _first(value: Any) -> str | None:
    return None if value is None else "must be null (the header is the first line)"


FIELDS: dict[str, dict[str, Validator]] = {
    fmt.HEADER: {
        "prev": _first,
        "format": _format,
        "session_id": _uuid,
        "org_id": _uuid,
        "model_id": _uuid,
        "model_name": _string,
        "model_snapshot": _string,
        "mode": _string,
        "state": _state,
        "n_items": _count,
        "n_delivered": _count,
        "created_at": _timestamp,
        "ended_at": _optional(_timestamp),
        "exported_at": _timestamp,
        "key_id": _hex(32),
        "public_key": _base64_key,
    },
    fmt.ITEM: {
        "prev": _hex(64),
        "position": _count,
        "item_id": _uuid,
        "family_id": _uuid,
        "question": _string,
        "options": _optional(_strings),
        "qtype": _string,
        "discipline": _string,
        "delivered_at": _optional(_timestamp),
    },
    fmt.ANSWER: {
        "prev": _hex(64),
        "position": _count,
        "item_id": _uuid,
        "answer": _string,
        "reasoning": _optional(_string),
        "submitted_at": _timestamp,
        "delivered_at": _timestamp,
        "prompt_tokens": _optional(_count),
        "completion_tokens": _optional(_count),
    },
    fmt.VERDICT: {
        "prev": _hex(64),
        "position": _count,
        "judge": _string,
        "prompt_version": _string,
        "score": _optional(_score),
        "method": _string,
        "needs_review": _boolean,
        "created_at": _timestamp,
    },
    fmt.COMMITMENT: {
        "prev": _hex(64),
        "commitment": _optional(_hex(64)),
        "revealed": _boolean,
    },
    fmt.SIGNATURE: {
        "prev": _hex(64),
        "sha256": _hex(64),
        "signature": _hex(128),
        "key_id": _hex(32),
    },
}
OPENING: dict[str, Validator] = {
    "seed": _string,
    "salt": _string,
    "source": _source,
    "item_ids": _uuids,
}
"""The commitment line's further fields when ``revealed`` is true."""
SECTIONS = [fmt.HEADER, fmt.ITEM, fmt.ANSWER, fmt.VERDICT, fmt.COMMITMENT]
"""The order of the line types before the signature."""


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


def _nested_text_problem(value: Any, depth: int = 0) -> str | None:
    """A lone surrogate or NUL anywhere in ``value`` (keys too), or nesting past
    ``MAX_DEPTH``."""
    if depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH}"
    if isinstance(value, str):
        return _text_problem(value)
    if isinstance(value, dict):
        for key, element in value.items():
            problem = _text_problem(key) or _nested_text_problem(element, depth + 1)
            if problem:
                return problem
    if isinstance(value, list):
        for element in value:
            problem = _nested_text_problem(element, depth + 1)
            if problem:
                return problem
    return None


# --- reading lines ---------------------------------------------------------------------


def _lines(stream: IO[bytes]) -> Iterator[tuple[int, bytes | None, int]]:
    """``(number, bytes, length)`` for each line (``bytes`` with its newline, or without
    it for a last line that has none); a line over ``MAX_LINE_BYTES`` is read through in
    pieces and given as ``None``, with its length, so memory stays bounded."""
    number = 0
    while True:
        data = stream.readline(fmt.MAX_LINE_BYTES + 1)
        if not data:
            return
        number += 1
        if len(data) <= fmt.MAX_LINE_BYTES or data.endswith(b"\n"):
            yield number, data, len(data)
            continue
        length = len(data)
        while not data.endswith(b"\n"):
            data = stream.readline(1024 * 1024)
            if not data:
                break
            length += len(data)
        yield number, None, length


def _parse(number: int, data: bytes, result: BundleCheck) -> dict[str, Any] | None:
    """The line's object, or None after adding what is wrong with it."""
    body = data[:-1] if data.endswith(b"\n") else data
    bad = NON_ASCII.search(body)
    if bad:
        result.add(
            number,
            None,
            f"byte 0x{bad.group()[0]:02x} at column {bad.start() + 1} is not "
            "ASCII (a bundle is ASCII JSON; invalid UTF-8 or re-encoded text?)",
        )
        return None
    bad = CONTROL.search(body)
    if bad:
        name = "NUL" if bad.group() == b"\x00" else f"control byte 0x{bad.group()[0]:02x}"
        result.add(number, None, f"{name} at column {bad.start() + 1}")
        return None
    try:
        value = json.loads(body.decode("ascii"))
    except RecursionError:
        result.add(number, None, "nested too deeply to read")
        return None
    except ValueError as error:
        result.add(number, None, f"not JSON ({_json_error(error)})")
        return None
    if not isinstance(value, dict):
        result.add(number, None, f"must be a JSON object, not {_kind(value)}")
        return None
    problem = _nested_text_problem(value)
    if problem:
        result.add(number, None, problem)
        return None
    try:
        if fmt.canonical(value) != body:
            result.add(number, None, "not in canonical form (sorted keys, no spaces, ASCII)")
    except ValueError as error:  # a float JSON cannot write back (inf from 1e999)
        result.add(number, None, f"holds a number out of range ({error})")
        return None
    return value


def _json_error(error: ValueError) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at column {error.colno}"
    return str(error)[:200]


def _fields(number: int, value: dict[str, Any], result: BundleCheck) -> str | None:
    """The line's type if its fields are exactly those of a known type and all valid."""
    kind = value.get("type")
    if not isinstance(kind, str) or kind not in FIELDS:
        shown = kind if isinstance(kind, str) else _kind(kind)
        result.add(number, "type", f"unknown line type {str(shown)[:40]!r}")
        return None
    spec = dict(FIELDS[kind])
    if kind == fmt.COMMITMENT and value.get("revealed") is True:
        spec.update(OPENING)
    ok = True
    for name in sorted(spec.keys() - value.keys()):
        result.add(number, name, "missing")
        ok = False
    for name in sorted(value.keys() - spec.keys() - {"type"}):
        result.add(number, name[:60], f"not a field of a {kind} line")
        ok = False
    for name, check in spec.items():
        if name in value:
            problem = check(value[name])
            if problem:
                result.add(number, name, problem)
                ok = False
    return kind if ok else None


# --- the bundle ------------------------------------------------------------------------


@dataclass(slots=True)
class _State:
    """What the walk has seen so far."""

    section: int = -1
    header: dict[str, Any] | None = None
    items: dict[int, str] = field(default_factory=dict)
    """Delivered position -> item id."""
    answered: set[int] = field(default_factory=set)
    last_position: dict[str, int] = field(default_factory=dict)
    commitment: dict[str, Any] | None = None
    commitment_line: int = 0
    signature: dict[str, Any] | None = None
    signature_line: int = 0


def check_bundle(stream: IO[bytes], *, public_key: PublicKey | None = None) -> BundleCheck:
    """Check the bundle read from ``stream`` (see the module docstring); with
    ``public_key`` the signature must be that key's, else the header's key is used,
    ``origin_checked`` stays False and so does ``ok`` (``intact`` may hold)."""
    result = BundleCheck()
    state = _State()
    digest = hashlib.sha256()
    prev: str | None = None
    """The SHA-256 of the line before (None before the first line and after an unreadable
    one, whose hash is unknown)."""
    for number, data, length in _lines(stream):
        result.n_lines = number
        if state.signature_line:
            result.add(number, None, f"comes after the signature (line {state.signature_line})")
            continue
        if data is None:
            result.add(number, None, f"longer than {fmt.MAX_LINE_BYTES} bytes ({length})")
            digest.update(b"\x00unreadable line\x00")  # the hash cannot match any more
            prev = None
            continue
        value = _parse(number, data, result)
        kind = _fields(number, value, result) if value is not None else None
        if kind is not None and value is not None and number > 1 and prev is not None:
            _link(number, value, prev, result)
        prev = hashlib.sha256(data).hexdigest()
        if kind == fmt.SIGNATURE and value is not None:
            state.signature, state.signature_line = value, number
            continue
        if not data.endswith(b"\n"):
            result.add(number, None, "has no newline at its end")
        digest.update(data)
        if kind is not None and value is not None:
            _walk(number, kind, value, state, result)
    result.sha256 = digest.hexdigest()
    _finish(state, result, public_key)
    return result


def _link(number: int, value: Mapping[str, Any], prev: str, result: BundleCheck) -> None:
    """Whether the line's ``prev`` is the hash of the line before it."""
    if value["prev"] != prev:
        result.add(
            number,
            "prev",
            f"is not the hash of line {number - 1}: line {number - 1} was changed, or lines "
            "were removed, inserted or moved just before this one",
        )


def check_bundle_bytes(data: bytes, *, public_key: PublicKey | None = None) -> BundleCheck:
    """``check_bundle`` of a bundle held in memory."""
    return check_bundle(io.BytesIO(data), public_key=public_key)


def _walk(
    number: int, kind: str, value: dict[str, Any], state: _State, result: BundleCheck
) -> None:
    """Order and cross-references of one well-formed line."""
    result.counts[kind] = result.counts.get(kind, 0) + 1
    section = SECTIONS.index(kind)
    if section < state.section:
        result.add(number, "type", f"a {kind} line after the {SECTIONS[state.section]} lines")
    elif kind in (fmt.HEADER, fmt.COMMITMENT) and section == state.section:
        result.add(number, "type", f"a second {kind} line")
    if number == 1 and kind != fmt.HEADER:
        result.add(number, "type", "the first line must be the header")
    state.section = max(state.section, section)
    if kind == fmt.HEADER:
        if state.header is None:
            state.header = value
            result.session_id, result.state = value["session_id"], value["state"]
        return
    if kind == fmt.COMMITMENT:
        state.commitment, state.commitment_line = value, number
        return
    position = int(value["position"])
    last = state.last_position.get(kind)
    strictly = kind != fmt.VERDICT
    if last is not None and (position < last or (strictly and position == last)):
        order = "increasing" if strictly else "non-decreasing"
        result.add(number, "position", f"{position} breaks the {order} order (after {last})")
    state.last_position[kind] = position
    if kind == fmt.ITEM:
        state.items[position] = value["item_id"]
    elif kind == fmt.ANSWER:
        delivered = state.items.get(position)
        if delivered is None:
            result.add(number, "position", f"answers position {position}, never delivered")
        elif delivered != value["item_id"]:
            result.add(
                number,
                "item_id",
                f"{value['item_id']} is not the item delivered at "
                f"position {position} ({delivered})",
            )
        state.answered.add(position)
    elif position not in state.answered:
        result.add(number, "position", f"a verdict on position {position}, never answered")


def _finish(state: _State, result: BundleCheck, trusted: PublicKey | None) -> None:
    """Whole-bundle checks: the sections present, delivered positions, the commitment,
    the signature."""
    header = state.header
    if result.n_lines == 0:
        result.add(None, None, "the bundle is empty")
        return
    if header is None:
        result.add(None, None, "no header line")
    else:
        _delivered(header, state, result)
    if state.commitment is None:
        result.add(None, None, "no commitment line")
    else:
        _commitment(header, state, result)
    if state.signature is None:
        result.add(None, None, "no signature line (the last line): the bundle is cut short")
        return
    _signature(header, state, result, trusted)


def _delivered(header: Mapping[str, Any], state: _State, result: BundleCheck) -> None:
    expected = int(header["n_delivered"])
    if sorted(state.items) != list(range(len(state.items))) or len(state.items) != expected:
        result.add(
            None,
            "item",
            f"{len(state.items)} item lines at positions that are not "
            f"0..{expected - 1} (the header says {expected} delivered)",
        )


def _commitment(header: Mapping[str, Any] | None, state: _State, result: BundleCheck) -> None:
    line = state.commitment_line
    value = state.commitment
    assert value is not None
    result.commitment = value["commitment"]
    if not value["revealed"]:
        return
    result.commitment_revealed = True
    if header is not None and header["state"] not in SCORED_STATE_VALUES:
        result.add(line, "revealed", f"the seed is revealed but the session is {header['state']}")
    if value["commitment"] is None:
        result.add(line, "commitment", "an opening without a commitment")
        result.commitment_valid = False
        return
    try:
        recomputed = commitment_hash(
            seed=value["seed"],
            salt=value["salt"],
            source=parse_source(value["source"]),
            item_ids=value["item_ids"],
        )
    except (TypeError, ValueError) as error:
        result.add(line, "source", f"cannot be hashed ({type(error).__name__})")
        result.commitment_valid = False
        return
    result.commitment_valid = recomputed == value["commitment"]
    if not result.commitment_valid:
        result.add(line, "commitment", "the seed, salt, source and item ids do not hash to it")
        return
    _placement(header, state, result, value["item_ids"])


def _ordered(mode: object) -> bool:
    """Whether sessions of ``mode`` deliver in committed order (an unknown mode: yes)."""
    spec = MODES.get(mode) if isinstance(mode, str) else None
    return spec is None or spec.traits.ordered


def _placement(
    header: Mapping[str, Any] | None, state: _State, result: BundleCheck, item_ids: list[str]
) -> None:
    """An ordered mode (``Traits.ordered``: fixed, replay, anchor, item set) delivers in
    the committed order; adaptive sessions deliver committed items in an order the server
    picks. A header without a known mode is checked for order."""
    ordered = header is None or _ordered(header["mode"])
    committed = set(item_ids)
    for position, item_id in sorted(state.items.items()):
        if ordered:
            at = item_ids[position] if position < len(item_ids) else None
            if at != item_id:
                result.add(
                    state.commitment_line,
                    "item_ids",
                    f"position {position} delivered {item_id}, the commitment has {at}",
                )
        elif item_id not in committed:
            result.add(
                state.commitment_line,
                "item_ids",
                f"position {position} delivered {item_id}, which is not in the committed sample",
            )


def _signature(
    header: Mapping[str, Any] | None, state: _State, result: BundleCheck, trusted: PublicKey | None
) -> None:
    line = state.signature_line
    signature = state.signature
    assert signature is not None
    result.key_id = signature["key_id"]
    if signature["sha256"] != result.sha256:
        result.add(
            line,
            "sha256",
            "does not match the lines before it (a line was changed, added, removed or moved)",
        )
    key = trusted
    if key is None:
        if header is None:
            result.add(line, "signature", "no header key to check it against")
            return
        try:
            key = parse_public(header["public_key"], source="the header's public_key")
        except InvalidInput as error:
            result.add(1, "public_key", error.detail)
            return
        if key.key_id != header["key_id"]:
            result.add(1, "key_id", "is not the id of the header's public_key")
    elif header is not None and header["key_id"] != key.key_id:
        result.add(1, "key_id", f"{header['key_id']} is not the trusted key {key.key_id}")
    if signature["key_id"] != key.key_id:
        result.add(line, "key_id", f"{signature['key_id']} is not the key checked ({key.key_id})")
    valid = key.verifies(signature["signature"], fmt.signed_payload(signature["sha256"]))
    if not valid:
        result.add(line, "signature", f"not a valid signature by key {key.key_id}")
    result.signature_valid = valid and signature["sha256"] == result.sha256
    result.origin_checked = result.signature_valid and trusted is not None


def load_public_key(text: str, *, source: str) -> PublicKey:
    """A trusted public key from a file's text (base64 raw or PEM); ``InvalidInput``."""
    return parse_public(text, source=source)
