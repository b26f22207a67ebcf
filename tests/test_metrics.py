"""Metrics and health on every node: master, worker and API each serve /metrics (prometheus_client),
/health (liveness) and /ready; every metric they expose is in the catalogue and documented in
docs/METRICS.md; counters are there from zero; the histograms see real work."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import asyncpg
import pytest

from engine.metrics import CATALOG, NodeMetrics
from engine.metrics_dashboard import dashboard
from engine.storage.pool import _time_acquisitions, database_reachable
from tests.conftest import ApiCluster
from tests.helpers import http_json, scrape
from tests.test_api import _name, shell_doc, start, wait_final

ROOT = Path(__file__).resolve().parents[1]
#: sample-name suffixes a family adds (histogram buckets, sums and counts; counters' totals)
SUFFIXES = ("_bucket", "_sum", "_count", "_total")
#: families prometheus_client's own collectors add (process, platform, gc): documented as a group
FOREIGN = ("process_", "python_")
DISPATCH_METHODS = ("task.dispatch", "task.dispatch_batch")


def _family(sample: str, prefix: str) -> str:
    name = sample.removeprefix(prefix)
    for suffix in SUFFIXES:
        if name.endswith(suffix) and name.removesuffix(suffix) in {s.name for spec in CATALOG.values() for s in spec}:
            return name.removesuffix(suffix)
    return name


def _documented() -> set[str]:
    text = (ROOT / "docs" / "METRICS.md").read_text()
    return set(re.findall(r"`porpoise_(?:master|worker|api)_(\w+)`", text))


def test_every_catalogued_metric_is_documented() -> None:
    documented = _documented()
    specs = [(role, s.name) for role, specs in CATALOG.items() for s in specs]
    missing = sorted(f"{role}: {name}" for role, name in specs if name not in documented)
    assert not missing, f"docs/METRICS.md lacks {missing}"


def test_counters_are_present_from_zero() -> None:
    for role, specs in CATALOG.items():
        seen = NodeMetrics(role).render().decode()
        for spec in specs:
            if spec.kind == "counter" and not spec.labels:
                assert f"porpoise_{role}_{spec.name}_total 0.0" in seen, (role, spec.name)
        if role == "worker":
            assert 'porpoise_worker_tasks_finished_total{state="FAILURE"} 0.0' in seen


async def test_pool_waits_are_timed(fresh_db: str) -> None:
    """asyncpg has no hook for acquisitions: this fails if its private ``_acquire`` changes."""
    waits: list[float] = []
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=1)
    try:
        _time_acquisitions(pool, waits.append)
        assert await pool.fetchval("SELECT 1") == 1
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT 2") == 2
        assert len(waits) == 2
        assert await database_reachable(pool)
    finally:
        await pool.close()
    assert not await database_reachable(None)


@pytest.mark.slow
def test_every_node_serves_health_ready_and_metrics(api_cluster: ApiCluster) -> None:
    client = api_cluster.client()
    name = _name("metered")
    code = client.post("/api/v1/workflows", shell_doc(name), release=True)["code"]
    assert wait_final(api_cluster, start(api_cluster, code))["state"] == "SUCCESS"
    nodes = {"master": api_cluster.master.url, "worker": api_cluster.worker.url, "api": api_cluster.url}
    documented = _documented()
    for role, address in nodes.items():
        status, body = http_json(f"{address}/health")
        assert status == 200 and body["role"] == role
        status, body = http_json(f"{address}/ready")
        assert status == 200 and body["ready"] is True, (role, body)
        if role != "worker":
            assert body["database"] is True
        seen = asyncio.run(asyncio.to_thread(scrape, address))
        prefix = f"porpoise_{role}_"
        families = {_family(name, prefix) for name, _ in seen if name.startswith(prefix)}
        catalogued = {s.name for s in CATALOG[role]}
        assert families <= catalogued, f"{role} exposes metrics outside the catalogue: {families - catalogued}"
        assert families <= documented
        assert any(name.startswith(FOREIGN) for name, _ in seen)  # process / platform collectors

    def count(address: str, name: str, **labels: str) -> float:
        found = scrape(address)
        return sum(v for (n, ls), v in found.items() if n == name and set(labels.items()) <= set(ls))

    worker, master, api = nodes["worker"], nodes["master"], nodes["api"]
    # the two tasks of this run (and any other test's on this shared cluster): seen by each histogram
    assert count(worker, "porpoise_worker_task_run_seconds_count", type="SHELL", state="SUCCESS") >= 2
    assert count(worker, "porpoise_worker_queue_time_seconds_count") >= 2
    assert count(worker, "porpoise_worker_report_delay_seconds_count", kind="result") >= 2
    assert count(worker, "porpoise_worker_tasks_finished_total", state="SUCCESS") >= 2
    assert count(worker, "porpoise_worker_rpc_latency_seconds_count", outcome="ok") >= 1  # its reports
    assert count(master, "porpoise_master_dispatch_wait_seconds_count") >= 2
    dispatches = sum(count(master, "porpoise_master_rpc_latency_seconds_count", method=m) for m in DISPATCH_METHODS)
    assert dispatches >= 1
    assert count(master, "porpoise_master_db_pool_wait_seconds_count") >= 1
    assert count(api, "porpoise_api_http_request_seconds_count", route="/api/v1/instances/{id}", status="2xx") >= 1
    assert count(api, "porpoise_api_db_pool_wait_seconds_count") >= 1


def test_the_committed_grafana_dashboard_is_current() -> None:
    committed = json.loads((ROOT / "docs" / "grafana" / "porpoise.json").read_text())
    assert committed == dashboard(), "docs/grafana/porpoise.json is stale: python -m engine.metrics_dashboard"
    exprs = [t["expr"] for p in committed["panels"] for t in p.get("targets", [])]
    catalogued = {f"porpoise_{role}_{s.name}" for role, specs in CATALOG.items() for s in specs}
    for expr in exprs:
        names = set(re.findall(r"porpoise_\w+", expr))
        assert names and all(n.removesuffix("_total").removesuffix("_bucket") in catalogued for n in names), expr
