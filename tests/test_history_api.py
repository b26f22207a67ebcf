"""The API side of history at scale: a project's own retention (keep_days) and keyset paging through the
instances list, on the shared API cluster (real master, worker, API and PostgreSQL)."""

from __future__ import annotations

import uuid

import pytest

from engine.client import ApiClientError
from tests.conftest import ApiCluster
from tests.helpers import start_workflow

pytestmark = pytest.mark.slow


def test_a_project_keeps_its_runs_as_long_as_it_says_within_the_dependent_look_back(api_cluster: ApiCluster) -> None:
    client = api_cluster.client()
    name = f"keep_{uuid.uuid4().hex[:8]}"
    created = client.post("/api/v1/projects", {"name": name})
    assert created["keep_days"] is None  # the cluster's history.keep_days
    assert client.patch(f"/api/v1/projects/{name}", {"keep_days": 400})["keep_days"] == 400
    assert client.get(f"/api/v1/projects/{name}")["keep_days"] == 400
    with pytest.raises(ApiClientError) as bad:
        client.patch(f"/api/v1/projects/{name}", {"keep_days": 30})
    assert bad.value.status == 400 and bad.value.field == "keep_days" and "62 days" in str(bad.value)
    with pytest.raises(ApiClientError) as unknown:
        client.patch(f"/api/v1/projects/{name}", {"keep": 100})
    assert unknown.value.status == 400
    assert client.get(f"/api/v1/projects/{name}")["keep_days"] == 400  # a refused change changes nothing
    assert client.patch(f"/api/v1/projects/{name}", {"keep_days": 0})["keep_days"] == 0  # for ever
    reset = client.patch(f"/api/v1/projects/{name}", {"keep_days": None, "description": "d"})
    assert reset["keep_days"] is None and reset["description"] == "d"


def test_keyset_pages_walk_the_whole_list_newest_first_without_gaps_or_repeats(api_cluster: ApiCluster) -> None:
    client = api_cluster.client()
    name = f"keyset_{uuid.uuid4().hex[:8]}"
    doc = {
        "name": name,
        "project": "api-tests",
        "tasks": [{"name": "a", "type": "SHELL", "params": {"rawScript": "true"}}],
    }
    code = client.post("/api/v1/workflows", doc, release=True)["code"]
    ids = sorted((start_workflow(client, code)["id"] for _ in range(5)), reverse=True)
    seen: list[int] = []
    before = None
    while True:
        query = {"workflow": code, "size": 2, **({"before": before} if before else {})}
        answer = client.get("/api/v1/instances", **query)
        seen += [i["id"] for i in answer["items"]]
        before = answer["next_before"]
        if before is None:
            break
        assert answer["total"] >= len(answer["items"])
    assert seen == ids
    first = client.get("/api/v1/instances", workflow=code, size=2)
    assert first["total"] == 5 and first["next_before"] == ids[1]
    assert client.get("/api/v1/instances", workflow=code, size=5)["next_before"] == ids[-1]
    with pytest.raises(ApiClientError) as bad:
        client.get("/api/v1/instances", before=0)
    assert bad.value.field == "query.before"
