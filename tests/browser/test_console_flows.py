"""The admin console in a real browser: Debian's Chromium driven by Playwright against
``proctor serve`` on 127.0.0.1 (PostgreSQL, Redis). Each flow is what a person does; each
page visited leaves a screenshot in ``.ci/artifacts/console/``."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path

import httpx
import pytest
from playwright.async_api import BrowserContext, Page, expect

from clients.sdk import AsyncProctorClient
from fakellm.app import ServerConfig
from judge.prompts import PROMPT_VERSION
from tests.support.browser_fixtures import JUDGE, ConsoleSite, screenshot_path
from tests.support.factories import mc_record
from tests.support.fake_llm import running_fake_llm
from tests.support.review import add_task, add_verdict, reviewer_key
from tests.support.scored import seed_scores

HOSTILE = '<script>window.__pwned=1</script>"\'><img src=x onerror="window.__pwned=2">'


@pytest.fixture(scope="module")
async def scored(console_site: ConsoleSite) -> tuple[uuid.UUID, ...]:
    """Scored sessions of four models (org-a's strong, org-b's weak, two hostile names)."""
    return await seed_scores(console_site.db_url, console_site.world)


async def log_in(page: Page, key: str) -> None:
    """Log in through the form, as a person would."""
    await page.goto("/console/login")
    await page.fill("#api_key", key)
    await page.click("button[type=submit]")


async def shot(page: Page, name: str) -> Path:
    """A full-page screenshot, kept as a test artifact."""
    path = screenshot_path(name)
    await page.screenshot(path=str(path), full_page=True)
    return path


async def test_log_in_and_visit_every_page(
    browser_context: BrowserContext, console_site: ConsoleSite, scored: tuple[uuid.UUID, ...]
) -> None:
    page = await browser_context.new_page()
    await log_in(page, console_site.world.a.keys["admin"])
    await expect(page.locator("h1")).to_have_text("Overview")
    cookie = next(c for c in await browser_context.cookies() if c["name"] == "proctor_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text) if m.type == "error" else None)
    for link in await page.locator("header nav a").all():
        label = (await link.inner_text()).strip()
        href = await link.get_attribute("href")
        assert href is not None
        response = await page.goto(href)
        assert response is not None and response.status == 200, (href, response)
        assert "content-security-policy" in response.headers
        await shot(page, f"page-{label.lower().replace(' ', '-')}")
    assert not [v for v in violations if "Content Security Policy" in v], violations


async def test_a_phone_sized_screen_shows_the_overview(
    browser_context: BrowserContext, console_site: ConsoleSite
) -> None:
    page = await browser_context.new_page()
    await page.set_viewport_size({"width": 390, "height": 844})
    await log_in(page, console_site.world.a.keys["admin"])
    await expect(page.locator("h1")).to_have_text("Overview")
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways on a phone ({width} px)"
    await shot(page, "phone-overview")


async def test_a_vendor_cannot_log_in(
    browser_context: BrowserContext, console_site: ConsoleSite
) -> None:
    page = await browser_context.new_page()
    await log_in(page, console_site.world.a.keys["vendor"])
    await expect(page.locator(".error .detail")).to_contain_text("vendor keys cannot log in")
    assert not [c for c in await browser_context.cookies() if c["name"] == "proctor_console"]
    await page.goto("/console")
    assert page.url.endswith("/console/login")


async def test_watch_a_session_answer_live_then_abort_it(
    browser_context: BrowserContext, console_site: ConsoleSite
) -> None:
    world = console_site.world
    assert world.a.model_id is not None
    async with AsyncProctorClient(console_site.url, world.a.keys["evaluator"]) as vendor:
        session = await vendor.create_session(model_id=world.a.model_id, n_items=6)
        page = await browser_context.new_page()
        await log_in(page, world.a.keys["admin"])
        await page.goto(f"/console/sessions/{session.id}")
        await expect(page.locator("[data-live-status]")).to_have_text("live")
        completed = page.locator("[data-field=n_completed]").first
        await expect(completed).to_have_text("0")
        for answered in range(1, 4):  # the page follows each answer without a reload
            item = await vendor.next_item(session.id)
            assert item is not None
            await vendor.submit_answer(session.id, item, "The answer is (A).")
            await expect(completed).to_have_text(str(answered))
        await shot(page, "session-live")
    page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    await page.click("button:has-text('Abort session')")
    await expect(page.locator("[data-field=state]").first).to_have_text("aborted")
    await shot(page, "session-aborted")


async def test_review_an_answer_and_see_its_score_change(
    browser_context: BrowserContext, console_site: ConsoleSite
) -> None:
    world = console_site.world
    assert world.a.model_id is not None
    async with AsyncProctorClient(console_site.url, world.a.keys["evaluator"]) as vendor:
        session = await vendor.create_session(model_id=world.a.model_id, n_items=2)
        for _ in range(2):
            item = await vendor.next_item(session.id)
            assert item is not None
            await vendor.submit_answer(session.id, item, HOSTILE)
    session_id = uuid.UUID(str(session.id))
    for position, score in ((0, 1), (1, 3)):
        await add_verdict(
            console_site.db_url,
            session_id,
            position,
            judge=JUDGE,
            score=score,
            prompt_version=PROMPT_VERSION,
        )
    task = await add_task(console_site.db_url, session_id, 0)
    page = await browser_context.new_page()
    await log_in(page, await reviewer_key(console_site.db_url, world.a.id))
    await expect(page.locator("h1")).to_contain_text("Review")
    await page.goto(f"/console/review/{task}")
    assert await page.evaluate("window.__pwned") is None  # the hostile answer stayed text
    await expect(page.locator("main")).to_contain_text("<script>window.__pwned=1</script>")
    await shot(page, "review-task")
    await page.check("input[name=score][value='3']")
    await page.fill("textarea[name=note]", "Right after all <b>bold</b>")
    await page.click("button:has-text('Save score')")
    await expect(page.locator(".notice.ok")).to_be_visible()
    async with httpx.AsyncClient(base_url=console_site.url) as client:
        token = (
            await client.post("/v1/auth/token", json={"api_key": world.a.keys["admin"]})
        ).json()["access_token"]
        scoring = await client.get(
            f"/v1/sessions/{session_id}/scoring", headers={"Authorization": f"Bearer {token}"}
        )
    assert scoring.json()["points"] == 6, json.dumps(scoring.json())


async def test_forms_without_a_valid_csrf_token_are_refused(
    browser_context: BrowserContext, console_site: ConsoleSite
) -> None:
    page = await browser_context.new_page()
    await log_in(page, console_site.world.a.keys["admin"])
    await expect(page.locator("h1")).to_have_text("Overview")
    for data in ({}, {"csrf_token": "forged"}):
        response = await page.request.post("/console/logout", form=data)
        assert response.status == 403, data
    await page.goto("/console")
    await expect(page.locator("h1")).to_have_text("Overview")  # still logged in
    token = await page.locator("input[name=csrf_token]").first.get_attribute("value")
    assert token and re.fullmatch(r"[A-Za-z0-9_-]{40,}", token)


async def test_designate_an_anchor_and_see_r_change(
    browser_context: BrowserContext, console_site: ConsoleSite, scored: tuple[uuid.UUID, ...]
) -> None:
    weak = scored[1]
    page = await browser_context.new_page()
    await log_in(page, console_site.world.a.keys["admin"])
    await page.goto("/console/leaderboard")
    row = page.locator("tbody tr").filter(has=page.locator(f"a[href='/console/models/{weak}']"))
    before = await row.inner_text()
    assert "100.0" not in before, before  # the top model anchors R: the weak one is below
    await page.select_option("#anchor-model", str(weak))
    page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    await page.click("form[action='/console/leaderboard/anchor'] button[type=submit]")
    await expect(page.locator(".notice.ok")).to_contain_text("Anchor designated")
    await expect(row).to_contain_text("100.0")
    await expect(page.locator("main")).to_contain_text("current")
    await shot(page, "leaderboard-anchored")


async def test_import_shows_the_bad_line_then_hostile_items_render_inert(
    browser_context: BrowserContext, console_site: ConsoleSite
) -> None:
    page = await browser_context.new_page()
    await log_in(page, console_site.world.a.keys["admin"])
    await page.goto("/console/bank")
    total = await page.locator(".figure .value").first.inner_text()
    bad = [mc_record(9001), {**mc_record(9002), "answer": ""}, mc_record(9003)]
    await upload(page, "bad.jsonl", bad)
    await expect(page.locator(".notice.bad")).to_contain_text("bad.jsonl:2: answer")
    await shot(page, "bank-import-refused")
    await page.goto("/console/bank")
    assert await page.locator(".figure .value").first.inner_text() == total  # all or nothing
    hostile = [
        mc_record(9101, question=f"Which is safe? {HOSTILE}", options=[HOSTILE, "b", "c", "d"])
    ]
    await upload(page, "hostile.jsonl", hostile)
    await expect(page.locator(".notice.ok")).to_contain_text("imported")
    await page.goto("/console/bank/items?q=Which+is+safe")
    await page.click("a:has-text('Which is safe?')")
    await expect(page.locator("main")).to_contain_text("<script>window.__pwned=1</script>")
    assert await page.evaluate("window.__pwned") is None
    assert await page.locator("main img").count() == 0  # the payload's <img> is text
    await shot(page, "bank-item-hostile")


async def upload(page: Page, name: str, records: list[dict[str, object]]) -> None:
    """Import ``records`` as the JSONL file ``name`` through the import page."""
    await page.goto("/console/bank/import")
    body = "".join(json.dumps(record) + "\n" for record in records).encode()
    await page.set_input_files(
        "input[name=file]", files=[{"name": name, "mimeType": "application/jsonl", "buffer": body}]
    )
    await page.click("form[action='/console/bank/import'] button[type=submit]")


async def test_an_auditor_reads_but_changes_nothing(
    browser_context: BrowserContext, console_site: ConsoleSite, scored: tuple[uuid.UUID, ...]
) -> None:
    page = await browser_context.new_page()
    await log_in(page, console_site.world.a.keys["auditor"])
    await expect(page.locator("h1")).to_have_text("Overview")
    token = await page.locator("input[name=csrf_token]").first.get_attribute("value")
    assert token
    pages = ["/console/leaderboard", "/console/bank/import", "/console/orgs", "/console/sessions"]
    for path in pages:
        await page.goto(path)
        forms = page.locator("main form[method=post]")
        assert await forms.count() == 0, f"{path} shows a form to an auditor"
    for path, data in (
        ("/console/leaderboard/anchor", {"model": str(scored[1])}),
        ("/console/orgs", {"name": "made-by-an-auditor"}),
    ):
        response = await page.request.post(path, form={**data, "csrf_token": token})
        assert response.status == 403, path


async def test_create_an_organisation_a_key_shown_once_then_revoke_it(
    browser_context: BrowserContext, console_site: ConsoleSite
) -> None:
    page = await browser_context.new_page()
    await log_in(page, console_site.world.a.keys["admin"])
    await page.goto("/console/orgs")
    await page.fill("#org-name", "Acme Labs")
    await page.click("form[action='/console/orgs'] button[type=submit]")
    await expect(page.locator("h1")).to_contain_text("Acme Labs")
    await page.fill("input[name=max_concurrent_sessions]", "2")
    await page.click("button:has-text('Save quotas')")
    await expect(page.locator("input[name=max_concurrent_sessions]")).to_have_value("2")
    org_page = page.url.split("?")[0]
    await page.select_option("#key-role", "evaluator")
    await page.click("button:has-text('Create key')")
    key = (await page.locator(".secret").inner_text()).strip()
    assert key.startswith("pk_")
    await shot(page, "org-key-created")
    async with httpx.AsyncClient(base_url=console_site.url) as client:
        exchange = await client.post("/v1/auth/token", json={"api_key": key})
        assert exchange.status_code == 200
        await page.goto(org_page)  # the key is never shown again: only its prefix
        assert key not in await page.content()
        await expect(page.locator("main")).to_contain_text(key[:10])
        page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
        await page.click("button:has-text('Revoke')")
        await expect(page.locator(".badge.bad")).to_contain_text("revoked")
        await shot(page, "org-key-revoked")
        refused = await client.post("/v1/auth/token", json={"api_key": key})
        assert refused.status_code == 401


async def test_evaluate_a_model_from_its_page_and_watch_the_run_finish(
    browser_context: BrowserContext, console_site: ConsoleSite
) -> None:
    world = console_site.world
    page = await browser_context.new_page()
    await log_in(page, world.a.keys["admin"])
    with running_fake_llm(ServerConfig(api_key="sk-browser-run-77aa", latency_ms=1000)) as llm:
        await page.goto(f"/console/models/{world.a.model_id}")
        await page.fill("input[name=base_url]", llm.base_url)
        await page.fill("input[name=model]", "model-strong")
        await page.fill("input[name=secret_value]", "Bearer sk-browser-run-77aa")
        await page.click("button:has-text('Save endpoint')")
        await expect(page.locator("main")).to_contain_text("Endpoint saved.")
        await page.click("button:has-text('Check the endpoint')")
        await expect(page.locator("main")).to_contain_text("The endpoint answered")
        assert "sk-browser-run-77aa" not in await page.content()
        await shot(page, "model-endpoint")
        await page.fill("section[aria-label=Evaluate] input[name=sessions]", "3")
        await page.fill("section[aria-label=Evaluate] input[name=n_items]", "2")
        await page.click("button:has-text('Evaluate')")
        await expect(page.locator("main")).to_contain_text("Run started")
        await page.locator("tr[data-run] a[href^='/console/runs/']").first.click()
        await expect(page.locator("[data-live-status]")).to_have_text("live")
        await page.evaluate("window.sameDocument = true")  # gone if the page were read again
        progress = page.locator("section[aria-label=Progress]")
        await expect(progress.locator("[data-field=state]")).to_have_text(
            "finished", timeout=60_000
        )
        await expect(progress.locator("[data-field=items]")).to_have_text("6 / 6")
        await expect(progress.locator("[data-field='s2.done']")).to_have_text("2 / 2")
        await expect(page.locator("[data-live-status]")).to_have_text("finished")
        assert await page.evaluate("window.sameDocument === true")  # moved by the stream
        await shot(page, "run-finished")
        assert llm.stats()["requests"] == 6 + 1  # each item once, and the check
