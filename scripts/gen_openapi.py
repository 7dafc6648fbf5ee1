"""Write docs/openapi.json, the OpenAPI document of the HTTP API, from the application.

Run ``python scripts/gen_openapi.py`` after changing a route or a body; tests/test_docs.py
fails while the committed document differs from what this renders. The document is the one
a running server serves at ``/openapi.json``; it does not depend on the settings, so it is
rendered with the defaults, without reading the environment.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from server.app import create_app  # noqa: E402
from server.config import Settings  # noqa: E402

PAGE = REPO / "docs" / "openapi.json"


def render() -> str:
    """The whole of docs/openapi.json: sorted keys, two-space indent, non-ASCII kept."""
    document = create_app(Settings.model_construct()).openapi()
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO)}")


if __name__ == "__main__":
    main()
