"""The web UI's committed API description is the API server's current one (the UI's types are generated
from ui/openapi.json; `make lint` checks they match it, this checks it matches the routes)."""

from __future__ import annotations

import json

from engine.api.openapi import document
from engine.api.server import ROUTES
from tests.helpers import ROOT


def test_committed_openapi_document_is_current() -> None:
    committed = json.loads((ROOT / "ui" / "openapi.json").read_text())
    assert committed == json.loads(json.dumps(document(ROUTES))), "ui/openapi.json is stale: run `make ui-api`"
