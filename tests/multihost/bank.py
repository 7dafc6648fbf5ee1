"""A generated bank for the multi-host run: enough distinct items that every session of both
runs gets a fresh unseen sample (sessions × items × 2 of them), cheap to import.

Three in four items are multiple choice (scored by the matchers), one in four short answers
(the exact and similarity stages, then the fake LLM judge on the worker host).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

DISCIPLINES = ("science", "engineering", "law", "medicine", "history")


def write_bank(path: Path, n_items: int, seed: int = 19) -> None:
    """``n_items`` items in the canonical JSONL format (docs/bank.md) at ``path``."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        for i in range(n_items):
            discipline = DISCIPLINES[i % len(DISCIPLINES)]
            record: dict[str, object] = {
                "discipline": discipline,
                "subdiscipline": f"{discipline} / multihost {i % 3}",
                "language": "en",
                "source": "tests/multihost generated bank",
            }
            if i % 4 == 3:
                word = f"{rng.choice(('amber', 'basalt', 'cobalt', 'dune', 'ember'))}-{i}"
                record |= {
                    "qtype": "short_answer",
                    "question": f"[multihost {i}] Which code word was issued to item {i}?",
                    "answer": word,
                }
            else:
                a, b = rng.randint(10, 999), rng.randint(10, 999)
                options = [a + b, a + b + 1, a + b - 1, a + b + 10]
                rng.shuffle(options)
                record |= {
                    "qtype": "multiple_choice",
                    "question": f"[multihost {i}] What is {a} + {b}?",
                    "options": [str(o) for o in options],
                    "answer": "ABCD"[options.index(a + b)],
                }
            out.write(json.dumps(record) + "\n")
