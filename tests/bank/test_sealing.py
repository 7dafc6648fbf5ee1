"""The cipher sealing the bank at rest (``bank.sealing``): round trips, every way a value
fails to open, parsing key entries, and the process-wide keyring."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bank import sealing
from bank.sealing import (
    BankKeyError,
    Keyring,
    SealedText,
    SealError,
    current,
    key_id_of,
    new_entry,
    parse_keyring,
    using,
)

KEY_A = base64.b64encode(bytes(range(32))).decode()
KEY_B = base64.b64encode(bytes(range(32, 64))).decode()
RING = parse_keyring(f"a:{KEY_A},b:{KEY_B}", source="PROCTOR_BANK_KEYS", lines=False)
COLUMN = "items.answer"


@given(st.text())
def test_any_text_round_trips(text: str) -> None:
    sealed = RING.seal(text, column=COLUMN)
    assert sealed.startswith("pk1:b:")
    assert RING.open(sealed, column=COLUMN) == text


@given(st.text(alphabet=st.sampled_from(["\x00", "\U0001f600", "\U00010348", "a", "é", "\n"])))
def test_nul_and_astral_characters_round_trip(text: str) -> None:
    assert RING.open(RING.seal(text, column=COLUMN), column=COLUMN) == text


def test_the_same_text_seals_differently_each_time() -> None:
    assert RING.seal("Paris", column=COLUMN) != RING.seal("Paris", column=COLUMN)
    assert "Paris" not in RING.seal("Paris", column=COLUMN)


def test_the_last_key_seals_and_every_key_opens() -> None:
    old = parse_keyring(f"a:{KEY_A}", source="x", lines=False)
    sealed_by_old = old.seal("Paris", column=COLUMN)
    assert key_id_of(sealed_by_old) == "a"
    assert RING.active_id == "b"
    assert RING.open(sealed_by_old, column=COLUMN) == "Paris"


def test_a_tampered_value_fails_to_open() -> None:
    sealed = RING.seal("Paris", column=COLUMN)
    head, token = sealed.rsplit(":", 1)
    raw = bytearray(base64.urlsafe_b64decode(token))
    raw[-1] ^= 1
    tampered = f"{head}:{base64.urlsafe_b64encode(bytes(raw)).decode()}"
    with pytest.raises(SealError, match="fails authentication"):
        RING.open(tampered, column=COLUMN)


def test_a_value_moved_to_another_column_fails_to_open() -> None:
    sealed = RING.seal("Paris", column="items.explanation")
    with pytest.raises(SealError, match=r"items\.answer: .*fails authentication"):
        RING.open(sealed, column=COLUMN)


def test_a_value_relabelled_with_another_key_id_fails_to_open() -> None:
    same_key_twice = Keyring([("a", bytes(range(32))), ("c", bytes(range(32)))])
    sealed = same_key_twice.seal("Paris", column=COLUMN)  # under c
    relabelled = "pk1:a:" + sealed.split(":", 2)[2]
    with pytest.raises(SealError, match="fails authentication"):
        same_key_twice.open(relabelled, column=COLUMN)


def test_an_unknown_key_id_is_named() -> None:
    other = parse_keyring(f"zz:{KEY_A}", source="x", lines=False)
    with pytest.raises(SealError, match=r"key 'zz'.*does not hold \(it has a, b\)"):
        RING.open(other.seal("Paris", column=COLUMN), column=COLUMN)


@pytest.mark.parametrize("stored", ["pk1:", "pk1:a", "pk1:a b:xx", "pk1:a:!!!!", "pk1:a:AAAA"])
def test_malformed_sealed_values_are_refused(stored: str) -> None:
    with pytest.raises(SealError):
        RING.open(stored, column=COLUMN)


def test_clear_text_has_no_key_id() -> None:
    assert key_id_of("Paris") is None
    assert key_id_of(RING.seal("x", column=COLUMN)) == "b"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "PROCTOR_BANK_KEYS: entry 1: empty"),
        (f"a:{KEY_A},", "PROCTOR_BANK_KEYS: entry 2: empty"),
        (f"a:{KEY_A},{KEY_B}", "PROCTOR_BANK_KEYS: entry 2: expected KEY_ID:BASE64"),
        (f"a:{KEY_A},b c:{KEY_B}", r"entry 2: the key id \(3 characters\) does not match"),
        (f"a:{KEY_A},{'x' * 33}:{KEY_B}", r"entry 2: the key id \(33 characters\) does not"),
        (f"{KEY_A}:a", r"entry 1: the key id \(44 characters\) does not match"),
        (f"a:{KEY_A},b:not*base64", "entry 2: key 'b' is not standard base64"),
        (f"a:{KEY_A},b:{base64.b64encode(bytes(16)).decode()}", "entry 2: key 'b' is 16 bytes"),
        (f"a:{KEY_A},a:{KEY_B}", "entry 2: key id 'a' is already given at entry 1"),
    ],
)
def test_bad_entries_are_refused_by_position(text: str, message: str) -> None:
    with pytest.raises(BankKeyError, match=message) as caught:
        parse_keyring(text, source="PROCTOR_BANK_KEYS", lines=False)
    assert KEY_B not in str(caught.value) and KEY_A not in str(caught.value)


def test_a_key_file_has_comments_and_blank_lines() -> None:
    text = f"# old key\na:{KEY_A}\n\n  b:{KEY_B}  # active\n"
    ring = parse_keyring(text, source="bank-keys", lines=True)
    assert ring.key_ids == ("a", "b") and ring.active_id == "b"
    with pytest.raises(BankKeyError, match="bank-keys: line 3: expected KEY_ID:BASE64"):
        parse_keyring(f"a:{KEY_A}\n\n{KEY_B}\n", source="bank-keys", lines=True)
    with pytest.raises(BankKeyError, match="bank-keys: no key"):
        parse_keyring("# nothing\n\n", source="bank-keys", lines=True)


def test_the_keyring_never_shows_its_keys() -> None:
    assert KEY_A not in repr(RING) and "a" in repr(RING)


def test_a_new_entry_parses_and_is_random() -> None:
    first, second = new_entry("k2"), new_entry("k2")
    assert first != second
    assert parse_keyring(first, source="x", lines=False).active_id == "k2"
    with pytest.raises(BankKeyError):
        new_entry("not an id")


def test_without_a_keyring_nothing_is_sealed_or_opened() -> None:
    kind = SealedText(COLUMN)
    sealed = RING.seal("Paris", column=COLUMN)
    with using(None):
        with pytest.raises(BankKeyError, match="no bank keyring is installed"):
            kind.seal("Paris")
        with pytest.raises(BankKeyError, match="no bank keyring is installed"):
            kind.process_result_value(sealed, None)  # type: ignore[arg-type]
        assert kind.process_result_value("clear", None) == "clear"  # type: ignore[arg-type]
    with using(RING):
        assert kind.process_result_value(sealed, None) == "Paris"  # type: ignore[arg-type]


def test_a_loader_is_called_once_on_first_use() -> None:
    calls: list[int] = []

    def load() -> Keyring:
        calls.append(1)
        return RING

    with using(load):
        assert calls == []
        assert current() is RING and current() is RING
    assert calls == [1]


def test_using_puts_the_previous_keyring_back() -> None:
    before = current()
    with using(RING):
        assert current() is RING
    assert current() is before
    token = sealing.install(RING)
    sealing.restore(token)
    assert current() is before
