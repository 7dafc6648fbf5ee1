"""``PATCH /admin/profiles/{name}`` and ``noise_mode``: a judge's noise changed while the
fake server runs, over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from judge.prompts import JudgeInput, render
from judge.verdict import parse_verdict
from tests.support.fake_llm import FakeLlm, running_fake_llm


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLlm]:
    with running_fake_llm() as server:
        yield server


def ratings(fake: FakeLlm, model: str, n: int = 200) -> list[int]:
    """The judge's ratings of ``n`` correct answers (a noise-free judge gives 3 to each)."""
    found = []
    with httpx.Client(timeout=10) as client:
        for i in range(n):
            messages = render(JudgeInput(f"Question {i}?", f"The answer is {i}.", str(i)))
            reply = client.post(
                f"{fake.base_url}/chat/completions", json={"model": model, "messages": messages}
            )
            reply.raise_for_status()
            content = reply.json()["choices"][0]["message"]["content"]
            found.append(parse_verdict(content).rating)
    return found


def test_raising_a_judges_uniform_noise_mid_run_changes_its_ratings(fake: FakeLlm) -> None:
    assert set(ratings(fake, "judge")) == {3}
    patched = httpx.patch(
        f"{fake.root}/admin/profiles/judge", json={"noise": 0.6, "noise_mode": "uniform"}
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["noise"] == 0.6 and patched.json()["noise_mode"] == "uniform"
    noisy = ratings(fake, "judge")
    share_changed = sum(r != 3 for r in noisy) / len(noisy)
    # uniform noise keeps 3 with probability 1/4: 0.6 * 3/4 = 0.45 of ratings change
    assert 0.33 < share_changed < 0.57
    assert {0, 1, 2} <= set(noisy), "uniform noise reaches every rating"
    assert httpx.patch(f"{fake.root}/admin/profiles/judge", json={"noise": 0}).status_code == 200
    assert set(ratings(fake, "judge", 50)) == {3}


def test_middle_noise_stays_one_step_from_the_rating(fake: FakeLlm) -> None:
    httpx.patch(f"{fake.root}/admin/profiles/judge-noisy", json={"noise": 1.0})
    assert set(ratings(fake, "judge-noisy", 30)) == {2}


def test_bad_profile_changes_are_refused(fake: FakeLlm) -> None:
    root = fake.root
    unknown = httpx.patch(f"{root}/admin/profiles/no-such-judge", json={"noise": 0.1})
    assert unknown.status_code == 404
    for body in ({"noise": 2}, {"noise_mode": "sideways"}, {"colour": "red"}, [1]):
        response = httpx.patch(f"{root}/admin/profiles/judge", json=body)
        assert response.status_code == 400, body
        assert "judge" in response.json()["error"]["message"]
    garbage = httpx.patch(f"{root}/admin/profiles/judge", content=b"\xff{")
    assert garbage.status_code == 400
    assert set(ratings(fake, "judge", 20)) == {3}, "a refused change changes nothing"
