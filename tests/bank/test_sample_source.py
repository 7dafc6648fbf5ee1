"""A sample's source: the one writer and the one reader of its JSON agree with each other
and with the dicts the draws wrote before sources were typed, byte for byte in the
commitment's canonical JSON, so every commitment already given still recomputes; the
reader refuses anything else with a ``SourceError``, never another exception."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bank.sampling.commitment import VERSION, commitment, commitment_payload
from bank.sampling.source import (
    AnchorSource,
    ItemSetSource,
    SampleSource,
    SourceError,
    SourceKind,
    StratifiedSource,
    parse_source,
    source_json,
)

SEED = "00112233445566778899aabbccddeeff"
SALT = "ffeeddccbbaa99887766554433221100"
ITEMS = ["6f9619ff-8b86-d011-b42d-00c04fc964ff", "00000000-0000-0000-0000-000000000001"]
PREFIX = (
    b'{"items":["6f9619ff-8b86-d011-b42d-00c04fc964ff","00000000-0000-0000-0000-000000000001"],'
    b'"salt":"ffeeddccbbaa99887766554433221100","seed":"00112233445566778899aabbccddeeff",'
)
SUFFIX = b',"v":"proctor-sample-commitment-v1"}'
PINNED: list[tuple[SampleSource, dict[str, Any], bytes, str]] = [
    (
        StratifiedSource(("law", "math")),
        {"kind": "stratified", "disciplines": ["law", "math"]},
        b'"source":{"disciplines":["law","math"],"kind":"stratified"}',
        "b93f4e4937ee677a769ba40a57480966e1236c545c2b26583f02375bef5a3845",
    ),
    (
        StratifiedSource(()),
        {"kind": "stratified", "disciplines": []},
        b'"source":{"disciplines":[],"kind":"stratified"}',
        "d962ab77263fca1caca547446624d8b4b2b1b2dfe41a6bd7168a0d78c34e63ff",
    ),
    (
        AnchorSource(),
        {"kind": "anchor"},
        b'"source":{"kind":"anchor"}',
        "1059e538718e9ddfd12b134c7ded1444cc56ec97ed0c1c016e670723dddacaf5",
    ),
    (
        ItemSetSource(uuid.UUID(int=5)),
        {"kind": "item_set", "item_set_id": "00000000-0000-0000-0000-000000000005"},
        b'"source":{"item_set_id":"00000000-0000-0000-0000-000000000005","kind":"item_set"}',
        "17b3e90ead5a2d933c5d381f61bca0f08357f9431fe3d1b9b63b053ec753aec0",
    ),
]
"""Per kind: the source, the dict its draw wrote before sources were typed, the bytes of it
in the commitment and the commitment (computed with the dict, before the change)."""


@pytest.mark.parametrize(("source", "old", "hashed", "digest"), PINNED)
def test_every_kind_hashes_to_its_pinned_vector(
    source: SampleSource, old: dict[str, Any], hashed: bytes, digest: str
) -> None:
    payload = PREFIX + hashed + SUFFIX
    assert source_json(source) == old and parse_source(old) == source
    for given_as in (source, old):
        assert commitment_payload(seed=SEED, salt=SALT, source=given_as, item_ids=ITEMS) == (
            payload
        )
        assert commitment(seed=SEED, salt=SALT, source=given_as, item_ids=ITEMS) == digest
    assert hashlib.sha256(payload).hexdigest() == digest


TEXT = st.text(st.characters(exclude_categories=()), max_size=12)
"""Any string, lone surrogates and NUL included."""
SOURCES: st.SearchStrategy[SampleSource] = st.one_of(
    st.builds(StratifiedSource, st.lists(TEXT, max_size=6).map(tuple)),
    st.just(AnchorSource()),
    st.builds(ItemSetSource, st.uuids()),
)


def old_dict(source: SampleSource) -> dict[str, Any]:
    """The dict the draws wrote before sources were typed (as each producer built it)."""
    if isinstance(source, StratifiedSource):
        return {"kind": "stratified", "disciplines": list(source.disciplines)}
    if isinstance(source, AnchorSource):
        return {"kind": "anchor"}
    return {"kind": "item_set", "item_set_id": str(source.item_set_id)}


def canonical(value: Any) -> bytes:
    """The commitment's canonical JSON (``bank.sampling.commitment``)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


@settings(max_examples=200, deadline=None)
@given(source=SOURCES)
def test_the_reader_reads_back_what_the_writer_wrote(source: SampleSource) -> None:
    written = source_json(source)
    assert parse_source(written) == source
    stored = json.loads(canonical(written))  # as the JSON column gives it back
    assert parse_source(stored) == source
    assert source_json(parse_source(stored)) == stored


@settings(max_examples=200, deadline=None)
@given(source=SOURCES)
def test_the_old_dicts_read_and_write_back_byte_identical(source: SampleSource) -> None:
    old = old_dict(source)
    assert source_json(parse_source(old)) == old
    assert canonical(source_json(parse_source(old))) == canonical(old)
    assert canonical(source_json(source)) == canonical(old)


@settings(max_examples=100, deadline=None)
@given(
    source=SOURCES,
    seed=TEXT,
    salt=TEXT,
    item_ids=st.lists(st.uuids(), max_size=5),
)
def test_the_commitment_is_the_one_the_old_dict_gave(
    source: SampleSource, seed: str, salt: str, item_ids: list[uuid.UUID]
) -> None:
    old = old_dict(source)
    items = [str(i) for i in item_ids]
    body = {"v": VERSION, "seed": seed, "salt": salt, "source": old, "items": items}
    documented = hashlib.sha256(canonical(body)).hexdigest()
    typed = commitment(seed=seed, salt=salt, source=source, item_ids=item_ids)
    assert typed == commitment(seed=seed, salt=salt, source=old, item_ids=item_ids) == documented
    stored = json.loads(canonical(source_json(source)))
    assert commitment(seed=seed, salt=salt, source=parse_source(stored), item_ids=item_ids) == typed


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
NEAR_SOURCES = st.one_of(
    SOURCES.map(source_json),
    st.fixed_dictionaries(
        {"kind": st.sampled_from([k.value for k in SourceKind])},
        optional={"disciplines": JSON_VALUES, "item_set_id": JSON_VALUES | TEXT, "x": TEXT},
    ),
    st.builds(lambda d, k, v: {**d, k: v}, SOURCES.map(source_json), TEXT, JSON_VALUES),
)
"""Sources, and objects that look like them: a known kind with any fields, an extra field."""


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(JSON_VALUES, NEAR_SOURCES))
def test_the_reader_takes_exactly_what_the_writer_writes(value: Any) -> None:
    try:
        source = parse_source(value)
    except SourceError as error:
        assert str(error)
        return
    assert source_json(source) == value
    assert canonical(source_json(source)) == canonical(value)


ID = "00000000-0000-0000-0000-000000000005"
REFUSED: dict[str, tuple[object, str, SourceKind | None]] = {
    "null": (None, "must be a JSON object, not null", None),
    "a list": ([{"kind": "anchor"}], "must be a JSON object, not an array", None),
    "a string": ("anchor", "must be a JSON object, not a string", None),
    "no kind": ({}, "has no kind", None),
    "kind not a string": ({"kind": 1}, "kind must be a string, not a number", None),
    "kind a boolean": ({"kind": True}, "kind must be a string, not a boolean", None),
    "unknown kind": (
        {"kind": "adaptive"},
        "unknown kind 'adaptive' (known: stratified, anchor, item_set)",
        None,
    ),
    "kind in capitals": ({"kind": "ANCHOR"}, "unknown kind 'ANCHOR'", None),
    "a long unknown kind": ({"kind": "k" * 10_000}, "unknown kind '" + "k" * 40 + "'", None),
    "a lone surrogate kind": ({"kind": "\ud800"}, "unknown kind '\\ud800'", None),
    "an extra field": (
        {"kind": "anchor", "x": None},
        "kind anchor has no field 'x'",
        SourceKind.ANCHOR,
    ),
    "another kind's field": (
        {"kind": "anchor", "disciplines": []},
        "kind anchor has no field 'disciplines'",
        SourceKind.ANCHOR,
    ),
    "a non-string key": ({"kind": "anchor", 7: 1}, "has no field 7", SourceKind.ANCHOR),
    "no disciplines": (
        {"kind": "stratified"},
        "kind stratified needs disciplines",
        SourceKind.STRATIFIED,
    ),
    "disciplines not a list": (
        {"kind": "stratified", "disciplines": "law"},
        "disciplines must be a list of strings, not a string",
        SourceKind.STRATIFIED,
    ),
    "disciplines a tuple": (
        {"kind": "stratified", "disciplines": ("law",)},
        "disciplines must be a list of strings, not tuple",
        SourceKind.STRATIFIED,
    ),
    "a discipline not a string": (
        {"kind": "stratified", "disciplines": ["law", None]},
        "disciplines[1] must be a string, not null",
        SourceKind.STRATIFIED,
    ),
    "no item set id": (
        {"kind": "item_set"},
        "kind item_set needs item_set_id",
        SourceKind.ITEM_SET,
    ),
    "item set id a number": (
        {"kind": "item_set", "item_set_id": 5},
        "item_set_id must be a UUID string, not a number",
        SourceKind.ITEM_SET,
    ),
    "item set id not a UUID": (
        {"kind": "item_set", "item_set_id": "s1"},
        "item_set_id 's1' is not a UUID in canonical form",
        SourceKind.ITEM_SET,
    ),
    "item set id in capitals": (
        {"kind": "item_set", "item_set_id": ID.upper().replace("0", "A")},
        "is not a UUID in canonical form (lowercase, hyphenated)",
        SourceKind.ITEM_SET,
    ),
    "item set id unhyphenated": (
        {"kind": "item_set", "item_set_id": ID.replace("-", "")},
        "is not a UUID in canonical form",
        SourceKind.ITEM_SET,
    ),
    "item set id in braces": (
        {"kind": "item_set", "item_set_id": "{" + ID + "}"},
        "is not a UUID in canonical form",
        SourceKind.ITEM_SET,
    ),
    "item set id as a URN": (
        {"kind": "item_set", "item_set_id": "urn:uuid:" + ID},
        "is not a UUID in canonical form",
        SourceKind.ITEM_SET,
    ),
    "item set id in other digits": (
        {"kind": "item_set", "item_set_id": "\u0661" * 32},
        "is not a UUID in canonical form",
        SourceKind.ITEM_SET,
    ),
    "item set id with surrogates": (
        {"kind": "item_set", "item_set_id": "\udfff" * 32},
        "is not a UUID in canonical form",
        SourceKind.ITEM_SET,
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_anything_else_is_refused_with_a_reason(case: str) -> None:
    value, message, kind = REFUSED[case]
    with pytest.raises(SourceError) as refused:
        parse_source(value)
    assert message in str(refused.value)
    assert refused.value.kind == kind
    assert len(str(refused.value)) < 200


def test_each_kind_names_its_kind() -> None:
    kinds = {type(s): s.kind for s, *_ in PINNED}
    assert kinds == {
        StratifiedSource: SourceKind.STRATIFIED,
        AnchorSource: SourceKind.ANCHOR,
        ItemSetSource: SourceKind.ITEM_SET,
    }
    assert all(source_json(s)["kind"] == s.kind.value for s, *_ in PINNED)
