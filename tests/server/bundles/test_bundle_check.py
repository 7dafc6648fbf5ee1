"""The offline bundle checker on bundles built here (pure: no database): consistency
checks a re-signed forgery cannot pass, and hostile bytes (invalid UTF-8, NUL, lone
surrogates, a 50 MB line, deep nesting, huge numbers) reported by line, never raised."""

from __future__ import annotations

import hashlib
import io
import json
import uuid
from typing import Any

import pytest

from bank.sampling.commitment import commitment, new_salt
from server.bundles import format as fmt
from server.bundles.check import check_bundle, check_bundle_bytes
from server.ledger.signing import SigningKey, new_private_text, parse_private
from server.sessions.modes import SessionMode

KEY = parse_private(new_private_text(), source="test")
TIME = "2026-11-24T10:00:00.000000Z"
SOURCE = {"kind": "stratified", "disciplines": ["d1", "d2"]}


def ids(n: int) -> list[str]:
    return [str(uuid.uuid5(uuid.NAMESPACE_OID, f"item-{i}")) for i in range(n)]


def records(
    *,
    state: str = "scored",
    mode: str = "fixed",
    n: int = 4,
    revealed: bool = True,
    key: SigningKey = KEY,
) -> list[dict[str, Any]]:
    """The lines (without ``prev`` and the signature) of a session of ``n`` delivered and
    answered items, each with one verdict, whose sample is ``ids(n + 2)``."""
    sample = ids(n + 2)
    header = {
        "type": "header",
        "format": fmt.FORMAT,
        "session_id": str(uuid.uuid4()),
        "org_id": str(uuid.uuid4()),
        "model_id": str(uuid.uuid4()),
        "model_name": "model",
        "model_snapshot": "v1",
        "mode": mode,
        "state": state,
        "n_items": n + 2,
        "n_delivered": n,
        "created_at": TIME,
        "ended_at": None,
        "exported_at": TIME,
        "key_id": key.public.key_id,
        "public_key": key.public.raw_b64,
    }
    items = [
        {
            "type": "item",
            "position": p,
            "item_id": sample[p],
            "family_id": sample[p],
            "question": f"Question {p}?",
            "options": ["a", "b"],
            "qtype": "multiple_choice",
            "discipline": "d1",
            "delivered_at": TIME,
        }
        for p in range(n)
    ]
    answers = [
        {
            "type": "answer",
            "position": p,
            "item_id": sample[p],
            "answer": "A",
            "reasoning": None,
            "submitted_at": TIME,
            "delivered_at": TIME,
            "prompt_tokens": 10,
            "completion_tokens": None,
        }
        for p in range(n)
    ]
    verdicts = [
        {
            "type": "verdict",
            "position": p,
            "judge": "human:ana" if p == 0 else "judge-v1",
            "prompt_version": "v1",
            "score": 3,
            "method": "objective",
            "needs_review": False,
            "created_at": TIME,
        }
        for p in range(n)
    ]
    seed, salt = "12345", new_salt()
    line: dict[str, Any] = {
        "type": "commitment",
        "commitment": commitment(seed=seed, salt=salt, source=SOURCE, item_ids=sample),
        "revealed": revealed,
    }
    if revealed:
        line.update(seed=seed, salt=salt, source=SOURCE, item_ids=sample)
    return [header, *items, *answers, *verdicts, line]


def sign(lines: list[dict[str, Any]], key: SigningKey = KEY) -> bytes:
    """The bundle of ``lines`` as the server writes it: chained and signed."""
    out, prev, digest = [], None, hashlib.sha256()
    for fields in lines:
        data = fmt.line({**fields, "prev": prev})
        digest.update(data)
        prev = hashlib.sha256(data).hexdigest()
        out.append(data)
    sha = digest.hexdigest()
    signature = key.sign(fmt.signed_payload(sha))
    out.append(
        fmt.line(
            {
                "type": "signature",
                "prev": prev,
                "sha256": sha,
                "signature": signature,
                "key_id": key.public.key_id,
            }
        )
    )
    return b"".join(out)


def problems(bundle: bytes) -> list[str]:
    result = check_bundle_bytes(bundle, public_key=KEY.public)
    assert not result.ok
    return [str(p) for p in result.problems]


def test_a_well_formed_bundle_verifies() -> None:
    result = check_bundle_bytes(sign(records()), public_key=KEY.public)
    assert result.ok and result.origin_checked, [str(p) for p in result.problems]
    assert result.commitment_revealed and result.commitment_valid
    assert result.counts == {"header": 1, "item": 4, "answer": 4, "verdict": 4, "commitment": 1}
    unopened = check_bundle_bytes(sign(records(state="active", revealed=False)))
    assert unopened.intact and not unopened.commitment_revealed
    assert not unopened.origin_checked and not unopened.ok  # no trusted key: no verdict
    assert unopened.as_json()["ok"] is False and unopened.as_json()["intact"] is True


def test_re_signed_forgeries_fail_their_consistency_checks() -> None:
    """A forger holding a signing key still cannot make an inconsistent record pass."""
    wrong_seed = records()
    wrong_seed[-1]["seed"] = "54321"
    assert "line 14: commitment: the seed, salt, source and item ids do not hash to it" in (
        problems(sign(wrong_seed))
    )
    swapped = records()  # a fixed session delivering items out of their committed order
    swapped[1]["item_id"], swapped[2]["item_id"] = swapped[2]["item_id"], swapped[1]["item_id"]
    swapped[5]["item_id"], swapped[6]["item_id"] = swapped[6]["item_id"], swapped[5]["item_id"]
    found = problems(sign(swapped))
    assert any(p.startswith("line 14: item_ids: position 0 delivered") for p in found), found
    for mode in SessionMode:  # every mode but adaptive delivers in the committed order
        moved = records(mode=mode)
        moved[1]["item_id"], moved[2]["item_id"] = moved[2]["item_id"], moved[1]["item_id"]
        moved[5]["item_id"], moved[6]["item_id"] = moved[6]["item_id"], moved[5]["item_id"]
        result = check_bundle_bytes(sign(moved), public_key=KEY.public)
        assert result.ok == (mode == SessionMode.ADAPTIVE), mode  # adaptive: any position
        if mode != SessionMode.ADAPTIVE:
            found = [str(p) for p in result.problems]
            assert any(p.startswith("line 14: item_ids: position 0 delivered") for p in found)
    foreign = records()
    foreign[5]["item_id"] = str(uuid.uuid4())
    assert any(p.startswith("line 6: item_id: ") for p in problems(sign(foreign)))
    undelivered = records()
    undelivered[8]["position"] = 9
    assert "line 9: position: answers position 9, never delivered" in problems(sign(undelivered))
    unanswered = records()
    del unanswered[5]
    found = problems(sign(unanswered))
    assert "line 9: position: a verdict on position 0, never answered" in found
    early = records(state="active")
    assert "line 14: revealed: the seed is revealed but the session is active" in problems(
        sign(early)
    )
    short = records()
    short[0]["n_delivered"] = 5
    assert any("the header says 5 delivered" in p for p in problems(sign(short)))


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ({"kind": "anchor", "x": 1}, "line 14: source: kind anchor has no field 'x'"),
        ({"kind": "adaptive"}, "line 14: source: unknown kind 'adaptive'"),
        ({"kind": "stratified", "disciplines": [1]}, "line 14: source: disciplines[0] must be"),
        ({"kind": "item_set", "item_set_id": "S1"}, "line 14: source: item_set_id 'S1' is not"),
        (["stratified"], "line 14: source: must be an object, not a list"),
    ],
)
def test_an_opening_must_name_a_sample_source(source: Any, problem: str) -> None:
    """Even hashed consistently, a source no draw writes is refused, by name."""
    forged = records()
    opening = forged[-1]
    opening["source"] = source
    if isinstance(source, dict):
        opening["commitment"] = commitment(
            seed=opening["seed"], salt=opening["salt"], source=source, item_ids=opening["item_ids"]
        )
    found = problems(sign(forged))
    assert any(p.startswith(problem) for p in found), found


def test_a_bundle_cut_short_or_reordered_is_named() -> None:
    bundle = sign(records())
    lines = bundle.splitlines(keepends=True)
    assert "no signature line (the last line): the bundle is cut short" in problems(
        b"".join(lines[:-1])
    )
    assert "the bundle is empty" in problems(b"")
    moved = b"".join([lines[0], *lines[5:9], *lines[1:5], *lines[9:]])  # answers first
    found = problems(moved)
    assert "line 6: type: a item line after the answer lines" in found
    assert "line 2: prev: is not the hash of line 1: line 1 was changed, or lines were " in (
        "\n".join(found)
    )
    no_header = b"".join(lines[1:])
    assert "line 1: type: the first line must be the header" in problems(no_header)


def test_the_signature_must_be_the_trusted_key() -> None:
    other = parse_private(new_private_text(), source="other")
    bundle = sign(records(key=other), key=other)  # a forger signing with a key of their own
    unpinned = check_bundle_bytes(bundle)
    assert unpinned.intact and unpinned.signature_valid  # it names its own key...
    assert not unpinned.origin_checked and not unpinned.ok  # ...which proves no origin
    found = problems(bundle)
    assert any(p.startswith("line 1: key_id: ") and "is not the trusted key" in p for p in found)
    assert any(p.startswith("line 15: signature: not a valid signature") for p in found)


def replaced(index: int, data: bytes) -> bytes:
    """The test bundle with line ``index`` (0-based) replaced by raw ``data``."""
    lines = sign(records()).splitlines(keepends=True)
    lines[index] = data
    return b"".join(lines)


HOSTILE: dict[str, tuple[bytes, str]] = {
    "invalid UTF-8": (b'{"type":"item","question":"\xff\xfe"}\n', "line 3: byte 0xff at column"),
    "UTF-8 text": ('{"type":"item","question":"é"}\n'.encode(), "line 3: byte 0xc3 at column"),
    "NUL byte": (b'{"type":"item"\x00}\n', "line 3: NUL at column 15"),
    "control byte": (b'{"type":"item"\x1b}\n', "line 3: control byte 0x1b at column 15"),
    "NUL escape": (b'{"question":"a\\u0000b","type":"item"}\n', "line 3: holds a NUL character"),
    "lone surrogate": (
        b'{"question":"\\ud800","type":"item"}\n',
        "line 3: holds a lone surrogate (\\ud800) at character 0",
    ),
    "lone surrogate key": (b'{"\\udfff":1,"type":"item"}\n', "line 3: holds a lone surrogate"),
    "deep nesting": (b"[" * 200_000 + b"]" * 200_000 + b"\n", "line 3: nested too deeply"),
    "nesting in an object": (
        b'{"source":' + b'{"a":' * 40 + b"1" + b"}" * 40 + b',"type":"commitment"}\n',
        "line 3: nested deeper than 16",
    ),
    "huge integer": (b'{"position":' + b"9" * 5000 + b',"type":"item"}\n', "line 3: not JSON"),
    "infinite float": (
        b'{"position":1e999,"type":"item"}\n',
        "line 3: holds a number out of range",
    ),
    "not an object": (b"[1,2]\n", "line 3: must be a JSON object, not a list"),
    "not JSON": (b"{'type': 'item'}\n", "line 3: not JSON (Expecting property name"),
    "unknown type": (b'{"type":"exploit"}\n', "line 3: type: unknown line type 'exploit'"),
    "not canonical": (b'{"type": "item"}\n', "line 3: not in canonical form"),
    "extra field": (b'{"pwn":1,"type":"header"}\n', "line 3: pwn: not a field of a header line"),
    "wrong field type": (
        b'{"answer":7,"type":"answer"}\n',
        "line 3: answer: must be a string, not a number",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_lines_are_reported_by_line(case: str) -> None:
    data, expected = HOSTILE[case]
    found = problems(replaced(2, data))
    assert any(p.startswith(expected) for p in found), found
    assert "line 15: sha256: does not match the lines before it" in "\n".join(found)


def test_a_50_mb_line_is_refused_unread_and_the_walk_goes_on() -> None:
    huge = b'{"question":"' + b"x" * (50 * 1024 * 1024) + b'"}\n'
    bundle = replaced(2, huge)
    result = check_bundle(io.BytesIO(bundle), public_key=KEY.public)
    found = [str(p) for p in result.problems]
    assert f"line 3: longer than {fmt.MAX_LINE_BYTES} bytes ({len(huge)})" in found
    assert result.n_lines == 15 and not result.ok
    assert "line 15: sha256: does not match the lines before it (a line was changed, added, " in (
        "\n".join(found)
    )


def test_a_line_without_a_newline_and_garbage_after_the_signature() -> None:
    bundle = sign(records())
    found = problems(bundle + b"trailing garbage")
    assert "line 16: comes after the signature (line 15)" in found
    lines = bundle.splitlines(keepends=True)
    assert check_bundle_bytes(bundle[:-1], public_key=KEY.public).ok  # last newline optional
    found = problems(b"".join(lines[:-2]) + lines[-2].rstrip(b"\n"))
    assert "line 14: has no newline at its end" in found


def test_many_problems_are_counted_beyond_those_kept() -> None:
    garbage = b"".join(b"\xff\n" for _ in range(5000))
    result = check_bundle_bytes(garbage, public_key=KEY.public)
    assert result.n_problems > len(result.problems) == 1000
    assert json.loads(json.dumps(result.as_json()))["n_problems"] == result.n_problems
