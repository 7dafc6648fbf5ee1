"""The SDK's commitment check: its hash is the server's (a pinned vector, hostile strings),
and ``verify_commitment`` accepts an honest reveal and names what is wrong with any other."""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from typing import Any

import pytest

from bank.sampling import commitment as server
from clients.sdk import (
    CommitmentReveal,
    Item,
    ProctorClient,
    SampleSource,
    commitment_of,
    verify_commitment,
)
from tests.clients.test_sdk_harness import model_of, sdk_settings, seeded, serving

PINNED: dict[str, Any] = {
    "seed": "00112233445566778899aabbccddeeff",
    "salt": "ffeeddccbbaa99887766554433221100",
    "source": {"kind": "stratified", "disciplines": ["law", "math"]},
    "item_ids": ["6F9619FF-8B86-D011-B42D-00C04FC964FF", "00000000-0000-0000-0000-000000000001"],
}
PINNED_BYTES = (
    b'{"items":["6f9619ff-8b86-d011-b42d-00c04fc964ff","00000000-0000-0000-0000-000000000001"],'
    b'"salt":"ffeeddccbbaa99887766554433221100","seed":"00112233445566778899aabbccddeeff",'
    b'"source":{"disciplines":["law","math"],"kind":"stratified"},'
    b'"v":"proctor-sample-commitment-v1"}'
)
PINNED_HASH = "b93f4e4937ee677a769ba40a57480966e1236c545c2b26583f02375bef5a3845"


def test_the_pinned_vector_is_the_documented_canonical_json() -> None:
    assert server.commitment_payload(**PINNED) == PINNED_BYTES
    assert hashlib.sha256(PINNED_BYTES).hexdigest() == PINNED_HASH
    assert server.commitment(**PINNED) == PINNED_HASH
    assert commitment_of(**PINNED) == PINNED_HASH


HOSTILE = [
    "\ud800",  # a lone surrogate
    "\udfff tail",
    "nul\x00inside",
    "\x00",
    "😀 emoji é",
    '"quoted" \\ backslash',
    "\u2028line separator",
    "",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_the_sdk_and_the_server_agree_on_hostile_strings(text: str) -> None:
    fields: dict[str, Any] = {
        "seed": text,
        "salt": text[::-1],
        "source": {"kind": "item_set", "item_set_id": text, text or "k": [text, None, 1]},
        "item_ids": [uuid.UUID(int=7), uuid.UUID(int=8)],
    }
    assert commitment_of(**fields) == server.commitment(**fields)
    assert server.commitment_payload(**fields).isascii()


ITEMS = [str(uuid.UUID(int=i + 1)) for i in range(4)]


def honest() -> CommitmentReveal:
    fields: dict[str, Any] = {"seed": "ab" * 16, "salt": "cd" * 16}
    promised = server.commitment(**fields, source={"kind": "anchor"}, item_ids=ITEMS)
    source = SampleSource.from_json({"kind": "anchor"})
    return CommitmentReveal(
        commitment=promised, revealed=True, item_ids=list(ITEMS), source=source, **fields
    )


PROMISED = honest().commitment or ""
"""The commitment the honest session gave at creation."""


def delivered(order: list[int]) -> list[Item]:
    return [
        Item(position=p, item_id=ITEMS[i], question="q", options=None, qtype="mc", discipline="d")
        for p, i in enumerate(order)
    ]


def test_an_honest_reveal_verifies_with_the_items_delivered() -> None:
    reveal = honest()
    promised = reveal.commitment
    assert promised is not None
    check = verify_commitment(reveal, delivered([0, 1, 2]), expected_commitment=promised)
    assert check.ok and bool(check) and check.problems == ()
    assert check.recomputed == reveal.commitment
    spelled = [(3, ITEMS[3].upper())]  # any UUID spelling
    assert verify_commitment(reveal, spelled, expected_commitment=promised).ok


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"seed": "00" * 16}, "hashes to"),
        ({"salt": "00" * 16}, "hashes to"),
        ({"source": SampleSource("stratified", disciplines=[])}, "hashes to"),
        ({"source": SampleSource("anchor", recorded={"kind": "anchor", "x": None})}, "hashes to"),
        ({"item_ids": [ITEMS[1], ITEMS[0], *ITEMS[2:]]}, "hashes to"),
        ({"item_ids": [str(uuid.uuid4()), *ITEMS[1:]]}, "hashes to"),
        ({"item_ids": ITEMS[:-1]}, "hashes to"),
        ({"item_ids": ["not-a-uuid", *ITEMS[1:]]}, "malformed"),
        ({"revealed": False, "seed": None}, "not revealed"),
        ({"commitment": None}, "no commitment"),
    ],
)
def test_a_tampered_reveal_fails(change: dict[str, Any], problem: str) -> None:
    forged = dataclasses.replace(honest(), **change)
    check = verify_commitment(forged, delivered([0, 1]), expected_commitment=PROMISED)
    assert not check.ok
    assert any(problem in p for p in check.problems), check.problems


def test_the_promise_given_at_creation_must_be_the_revealed_one() -> None:
    check = verify_commitment(honest(), expected_commitment="f" * 64)
    assert not check.ok and "not the one given at creation" in check.problems[0]
    # a reveal that agrees with itself (another seed, its hash recomputed) is no proof
    fields: dict[str, Any] = {"seed": "ee" * 16, "salt": "cd" * 16}
    redrawn = server.commitment(**fields, source={"kind": "anchor"}, item_ids=ITEMS)
    forged = dataclasses.replace(honest(), commitment=redrawn, **fields)
    assert verify_commitment(forged, expected_commitment=redrawn).ok  # self-consistent
    check = verify_commitment(forged, delivered([0, 1]), expected_commitment=PROMISED)
    assert not check.ok and "not the one given at creation" in check.problems[0]
    # and the promise cannot be left out
    with pytest.raises(TypeError, match="expected_commitment"):
        verify_commitment(forged, delivered([0, 1]))  # type: ignore[call-arg]


def test_a_delivered_item_outside_the_sample_or_out_of_order_fails() -> None:
    reveal = honest()
    outside = verify_commitment(
        reveal, [(0, ITEMS[0]), (1, uuid.UUID(int=99))], expected_commitment=PROMISED
    )
    assert outside.problems == (
        f"item {uuid.UUID(int=99)} (position 1) is not in the committed sample",
    )
    swapped = delivered([1, 0])
    assert not verify_commitment(reveal, swapped, expected_commitment=PROMISED).ok
    assert not verify_commitment(reveal, swapped, expected_commitment=PROMISED, mode="fixed").ok
    # an adaptive session picks which undelivered item comes next: membership only
    assert verify_commitment(reveal, swapped, expected_commitment=PROMISED, mode="adaptive").ok


def test_a_source_hashes_as_the_server_sent_it() -> None:
    sent = {"kind": "item_set", "item_set_id": "s1", "added_later": [1]}
    source = SampleSource.from_json(sent)
    assert (source.kind, source.item_set_id, source.disciplines) == ("item_set", "s1", None)
    assert source.to_json() == sent
    assert SampleSource("stratified", disciplines=["law"]).to_json() == {
        "kind": "stratified",
        "disciplines": ["law"],
    }
    fields: dict[str, Any] = {"seed": "s", "salt": "t", "item_ids": ITEMS}
    assert commitment_of(source=source, **fields) == server.commitment(source=sent, **fields)


def test_the_reveal_reads_from_the_wire() -> None:
    closed = CommitmentReveal.from_json({"commitment": "a" * 64, "revealed": False, "new": 1})
    assert closed == CommitmentReveal(commitment="a" * 64, revealed=False)
    assert closed["revealed"] is False
    with pytest.raises(ValueError, match="missing revealed"):
        CommitmentReveal.from_json({"commitment": None})


async def test_a_vendor_checks_its_session_with_the_blocking_client(fresh_db_url: str) -> None:
    """The documented recipe, over real HTTP: keep the promise, keep the items, verify."""
    db_url, world = await seeded(fresh_db_url)
    with (
        serving(sdk_settings(db_url)) as url,
        ProctorClient(url, world.a.keys["vendor"]) as client,
    ):
        session = client.create_session(model_id=model_of(world))
        promised = session.commitment
        assert promised is not None
        assert client.get_commitment(session.id).revealed is False
        delivered = []
        for item in client.items(session.id):
            delivered.append(item)
            client.submit_answer(session.id, item, "A")
        client.wait_scored(session.id, timeout_s=60, poll_s=0.1)
        reveal = client.get_commitment(session.id)
    check = verify_commitment(reveal, delivered, expected_commitment=promised)
    assert check.ok, check.problems
    assert reveal.item_ids is not None and len(reveal.item_ids) == len(delivered) > 0
