"""Vendors see only ``PROCTOR_LEADERBOARD_PUBLIC_FIELDS``, through every view and option.

The per-discipline view and the baselines and diagnostics options used to bypass the field
filter. Now each is a field of its own: a vendor asking for one outside the public set is
refused (403), the per-model view carries only public row fields, and the typed response
models refuse anything else.
"""

from __future__ import annotations

import pytest

from server.errors import Forbidden
from server.leaderboard.fields import (
    CSV,
    CSV_COLUMNS,
    DEFAULT_PUBLIC_FIELDS,
    LEADERBOARD_FIELDS,
    ROW_FIELDS,
    STAFF_ONLY_FIELDS,
    RowOut,
    Visibility,
    rounded,
)
from server.leaderboard.schemas import LeaderboardOut, csv_rows, disciplines_out, leaderboard_out
from tests.clients.test_report import real_data
from tests.support.api import World, login, running_api, test_settings

ROW_ONLY = {"model_id"}


async def test_vendor_options_outside_the_public_fields_are_refused(
    world_db: tuple[str, World],
) -> None:
    db_url, world = world_db
    public = ["position", "group", "rank_range", "name", "absolute", "relative"]
    settings = test_settings(db_url, leaderboard_public_fields=public)
    async with running_api(settings) as (_, client):
        vendor = await login(client, world.a.keys["vendor"])
        evaluator = await login(client, world.a.keys["evaluator"])
        for params in ({"view": "disciplines"}, {"baselines": "true"}, {"diagnostics": "true"}):
            refused = await client.get("/v1/leaderboard", params=params, headers=vendor)
            assert refused.status_code == 403, (params, refused.text)
            assert refused.headers["content-type"] == "application/problem+json"
            allowed = await client.get("/v1/leaderboard", params=params, headers=evaluator)
            assert allowed.status_code == 200, (params, allowed.text)
        plain = await client.get("/v1/leaderboard", headers=vendor)
        assert plain.status_code == 200 and "baselines" not in plain.json()


async def test_default_public_fields_keep_vendors_from_the_options(
    world_db: tuple[str, World],
) -> None:
    """By default the per-discipline view is public; baselines and diagnostics are not."""
    db_url, world = world_db
    async with running_api(test_settings(db_url)) as (_, client):
        vendor = await login(client, world.a.keys["vendor"])
        view = await client.get("/v1/leaderboard", params={"view": "disciplines"}, headers=vendor)
        assert view.status_code == 200 and "disciplines" in view.json()
        for option in ("baselines", "diagnostics"):
            refused = await client.get("/v1/leaderboard", params={option: "true"}, headers=vendor)
            assert refused.status_code == 403, refused.text


def test_rows_carry_only_visible_fields() -> None:
    data = real_data()
    public = frozenset(DEFAULT_PUBLIC_FIELDS)
    board = leaderboard_out(data, Visibility(public)).model_dump(exclude_unset=True)
    assert board["models"], "the fixture has models"
    for row in board["models"]:
        assert set(row) <= public | ROW_ONLY
        assert not {"latency", "cost", "contamination", "organisation"} & set(row)
    assert "diagnostics" not in board and "baselines" not in board
    full = leaderboard_out(data, Visibility(None)).model_dump(exclude_unset=True)
    assert all(list(row) == ["model_id", *ROW_FIELDS] for row in full["models"])
    assert full["diagnostics"] is not None


def test_a_row_s_registry_fields_come_from_the_model_s_info() -> None:
    data = real_data()
    for row in leaderboard_out(data, Visibility(None)).models:
        assert row.model_id is not None
        info = data.models[row.model_id]
        assert (row.family, row.organisation, row.under_review) == (
            info.family,
            info.organisation,
            info.sessions_under_review,
        )


def test_the_row_fields_are_the_catalogue_s_in_its_order() -> None:
    """``RowOut`` spells the catalogue's row fields a second time (typed): the two agree,
    and the board-level parts are the ones no row carries."""
    board_parts = {"baselines", "diagnostics"}
    assert [f for f in LEADERBOARD_FIELDS if f not in board_parts] == list(ROW_FIELDS)
    assert list(RowOut.model_fields) == ["model_id", *ROW_FIELDS]
    assert set(DEFAULT_PUBLIC_FIELDS) == set(LEADERBOARD_FIELDS) - STAFF_ONLY_FIELDS


def test_every_csv_column_shows_a_row_field_and_reads_its_value() -> None:
    data = real_data()
    assert all(column.field is None or column.field in ROW_FIELDS for column in CSV)
    assert len(set(CSV_COLUMNS)) == len(CSV_COLUMNS)
    (first, *_) = csv_rows(data)
    row = data.board.rows[0]
    assert first["model_id"] == row.key
    assert (first["rank_low"], first["rank_high"]) == row.rank_range
    assert first["absolute_ci_high"] == rounded(row.absolute.confidence_interval.high)
    assert first["relative"] == rounded(row.relative.mean if row.relative else None)
    assert first["usd_per_1k_items"] == rounded(row.usage.usd_per_1k_items)
    assert list(first) == [*CSV_COLUMNS, *data.board.disciplines]


def test_the_per_discipline_view_needs_the_disciplines_field() -> None:
    data = real_data()
    with pytest.raises(Forbidden):
        disciplines_out(data, Visibility(frozenset({"name", "absolute"})))
    shown = disciplines_out(data, Visibility(frozenset({"disciplines"})))
    assert {block.discipline for block in shown.disciplines} == {"code", "math", "writing"}


def test_the_response_model_refuses_unknown_row_fields() -> None:
    document = leaderboard_out(real_data(), Visibility(None)).model_dump()
    document["models"][0]["answer_key"] = "C"
    with pytest.raises(ValueError, match="answer_key"):
        LeaderboardOut.model_validate(document)


def test_the_openapi_document_types_the_leaderboard() -> None:
    from server.app import create_app

    schema = create_app(test_settings("sqlite+aiosqlite:///:memory:")).openapi()
    response = schema["paths"]["/v1/leaderboard"]["get"]["responses"]["200"]
    refs = str(response["content"]["application/json"]["schema"])
    assert "LeaderboardOut" in refs and "DisciplinesOut" in refs


def test_hidden_names_stay_hidden_in_board_level_parts() -> None:
    """With ``name`` not public, groups, the anchor, baselines and diagnostics speak of
    model ids, and the per-discipline view carries no names."""
    data = real_data()
    names = {row.name for row in data.board.rows}
    visible = Visibility(frozenset({"position", "group", "absolute", "disciplines", "diagnostics"}))
    board = leaderboard_out(data, visible).model_dump_json()
    view = disciplines_out(data, visible).model_dump_json()
    for text in (board, view):
        assert not any(f'"{name}"' in text for name in names), text[:300]
    shown = leaderboard_out(data, visible)
    assert {m for group in shown.groups for m in group} == {row.key for row in data.board.rows}
    assert shown.diagnostics is not None
    assert set(shown.diagnostics.models) == {row.key for row in data.board.rows}
