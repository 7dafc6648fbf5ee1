"""``proctor bank ...`` as a user runs it: a real subprocess against SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import proctor_db
from tests.support.database import new_postgres_database
from tests.support.factories import mc_record, open_record, write_jsonl
from tests.support.paths import SHARED_DATA
from tests.support.services import PostgresServer


def proctor_json(url: str, *args: str) -> Any:
    """Run ``proctor ARGS`` (which must print JSON) and parse its stdout."""
    return json.loads(proctor_db(url, *args).stdout)


def stats(url: str) -> dict[str, Any]:
    return dict(proctor_json(url, "bank", "stats", "--json"))


async def test_a_corrupted_file_is_refused_with_its_line_and_nothing_is_imported(
    fresh_db_url: str, tmp_path: Path, run_sync: Any
) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", [mc_record(i) for i in range(3)])
    await run_sync(proctor_db, fresh_db_url, "bank", "import", str(good))
    before = await run_sync(stats, fresh_db_url)
    bad = write_jsonl(
        tmp_path / "bad.jsonl", [open_record(10), open_record(11), mc_record(12, answer="Z")]
    )
    with bad.open("a", encoding="utf-8") as handle:
        handle.write('{"discipline": "Law", "qtype": \n')
    result = await run_sync(
        lambda: proctor_db(fresh_db_url, "bank", "import", str(bad), check=False)
    )
    assert result.returncode == 1
    assert f"{bad}:3: answer: 'Z' is not among the 4 options" in result.stderr
    assert f"{bad}:4: json: " in result.stderr
    assert "nothing was imported" in result.stderr
    assert await run_sync(stats, fresh_db_url) == before


HOSTILE_LINES: dict[str, tuple[bytes, str]] = {
    "deep": (b'{"discipline": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested deeper"),
    "5000-digits": (b'{"discipline": ' + b"9" * 5000 + b"}", "a number of 5000 characters"),
    "nul": (b'{"discipline": "Law\x00"}', "contains a NUL character"),
    "not-utf8": (b'{"discipline": "\xff"}', "not valid UTF-8"),
}


async def test_hostile_json_lines_are_refused_with_their_line_and_no_traceback(
    fresh_db_url: str, tmp_path: Path, run_sync: Any
) -> None:
    """Regression: a 200,000-deep line (RecursionError) or a 5,000-digit number (int
    conversion limit) printed a traceback; every hostile line is ``file:line: json:``."""
    good = write_jsonl(tmp_path / "good.jsonl", [mc_record(i) for i in range(3)])
    await run_sync(proctor_db, fresh_db_url, "bank", "import", str(good))
    before = await run_sync(stats, fresh_db_url)
    cases = [(name, 2, line, problem) for name, (line, problem) in HOSTILE_LINES.items()]
    # as the first line, the format detection reads it too
    cases += [(name, 1, *HOSTILE_LINES[name]) for name in ("deep", "5000-digits")]
    for name, lineno, line, problem in cases:
        bad = tmp_path / f"{name}-{lineno}.jsonl"
        before_it = json.dumps(mc_record(20)).encode() + b"\n" if lineno == 2 else b""
        bad.write_bytes(before_it + line + b"\n")
        result = await run_sync(
            lambda bad=bad: proctor_db(fresh_db_url, "bank", "import", str(bad), check=False)
        )
        assert result.returncode == 1, (name, result.stderr)
        assert f"{bad}:{lineno}: json: {problem}" in result.stderr, (name, result.stderr)
        assert "Traceback" not in result.stderr and "nothing was imported" in result.stderr
    assert await run_sync(stats, fresh_db_url) == before


async def test_import_stats_and_dry_run_sample_on_the_shipped_samples(
    fresh_db_url: str, run_sync: Any
) -> None:
    import_samples = (
        "bank",
        "import",
        "--sample",
        "gaokao_bench",
        "--sample",
        "mmlu_pro",
        "--json",
    )
    report = await run_sync(proctor_json, fresh_db_url, *import_samples)
    assert report["originals_added"] > 0 and report["variants_added"] > 0
    again = await run_sync(proctor_json, fresh_db_url, *import_samples)
    assert again["items_added"] == 0
    numbers = await run_sync(stats, fresh_db_url)
    assert set(numbers) >= {
        "items",
        "families",
        "originals",
        "augmented",
        "by_discipline",
        "by_qtype",
        "by_subdiscipline",
    }
    assert numbers["items"] == report["items_added"]
    assert numbers["originals"] == report["originals_added"]
    assert sum(numbers["by_discipline"].values()) == numbers["items"]
    await run_sync(proctor_db, fresh_db_url, "admin", "create-org", "acme")
    drawn = await run_sync(
        proctor_json, fresh_db_url, "bank", "sample", "--org", "acme", "--n", "200", "--json"
    )
    assert set(drawn) == {"seed", "n", "items", "shortfall"}
    assert len(drawn["items"]) == 200
    assert set(drawn["items"][0]) == {"id", "family_id", "discipline", "subdiscipline", "qtype"}
    replay = await run_sync(
        proctor_json,
        fresh_db_url,
        "bank",
        "sample",
        "--org",
        "acme",
        "--n",
        "200",
        "--seed",
        drawn["seed"],
        "--json",
    )
    assert replay["items"] == drawn["items"]  # a dry run recorded nothing, same seed same items
    assert await run_sync(stats, fresh_db_url) == numbers


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"real data not found at {SHARED_DATA}")
async def test_both_real_data_sets_import_with_the_right_augmentation_counts(
    postgres_server: PostgresServer, postgres_template: str, run_sync: Any
) -> None:
    fresh_db_url = await new_postgres_database(postgres_server, postgres_template)
    mmlu = await run_sync(
        proctor_json,
        fresh_db_url,
        "bank",
        "import",
        str(SHARED_DATA / "mmlu_pro" / "items.jsonl"),
        "--json",
    )
    gaokao = await run_sync(
        proctor_json,
        fresh_db_url,
        "bank",
        "import",
        "--format",
        "gaokao",
        str(SHARED_DATA / "gaokao_bench"),
        "--json",
    )
    assert mmlu["records"] == 12_032
    assert gaokao["records"] == 2_811
    # every multiple-choice original with n options gives n true/false items + 1 fill-in,
    # less variants whose text already exists in the bank:
    numbers = await run_sync(stats, fresh_db_url)
    mc_options = _multiple_choice_option_counts(SHARED_DATA / "mmlu_pro" / "items.jsonl")
    expected_mmlu_variants = sum(n + 1 for n in mc_options.values())
    skipped = mmlu["variants_skipped"]
    assert mmlu["variants_added"] == expected_mmlu_variants - skipped
    assert skipped < 0.01 * expected_mmlu_variants
    assert numbers["originals"] == mmlu["originals_added"] + gaokao["originals_added"]
    assert numbers["augmented"] == mmlu["variants_added"] + gaokao["variants_added"]
    assert numbers["by_qtype"]["multiple_choice"] > 12_000


def _multiple_choice_option_counts(path: Path) -> dict[str, int]:
    """content hash -> option count of the distinct multiple-choice records in ``path``."""
    from bank.duplicates.exact import content_hash
    from bank.formats import read_records
    from bank.records import validate_record

    counts: dict[str, int] = {}
    for raw in read_records(path, "mmlu_pro"):
        record = validate_record(raw)
        assert record.options is not None
        counts.setdefault(
            content_hash(record.qtype, record.question, record.options), len(record.options)
        )
    return counts


async def test_unreadable_input_and_bad_arguments_get_clear_messages(
    fresh_db_url: str, tmp_path: Path, run_sync: Any
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n", encoding="utf-8")
    result = await run_sync(
        lambda: proctor_db(fresh_db_url, "bank", "import", str(notes), check=False)
    )
    assert result.returncode == 2
    assert "notes.txt" in result.stderr and "Traceback" not in result.stderr
    empty = await run_sync(
        lambda: proctor_db(fresh_db_url, "admin", "create-org", " ", check=False)
    )
    assert empty.returncode == 1
    assert "organisation name must be 1-200 characters" in empty.stderr
    bad_seed = await run_sync(
        lambda: proctor_db(
            fresh_db_url, "bank", "sample", "--org", "x", "--seed", "xyz", check=False
        )
    )
    assert bad_seed.returncode == 2 and "hexadecimal" in bad_seed.stderr


async def test_one_seed_has_one_spelling(fresh_db_url: str, tmp_path: Path, run_sync: Any) -> None:
    bank = write_jsonl(tmp_path / "b.jsonl", [open_record(i) for i in range(40)])
    await run_sync(proctor_db, fresh_db_url, "bank", "import", str(bank))
    await run_sync(proctor_db, fresh_db_url, "admin", "create-org", "acme")
    draws = [
        await run_sync(
            proctor_json,
            fresh_db_url,
            "bank",
            "sample",
            "--org",
            "acme",
            "--n",
            "10",
            "--seed",
            seed,
            "--json",
        )
        for seed in ("0xAB12", "ab12", " AB12 ")
    ]
    assert draws[0]["seed"] == "ab12"
    assert draws[0]["items"] == draws[1]["items"] == draws[2]["items"]
