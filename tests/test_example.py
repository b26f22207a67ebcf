"""The example data pipeline (examples/taxi) end to end: the real CLI applies and starts it through
the real API; a real master and worker run the generator, Spark, the SQL load and the quality check."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import asyncpg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from engine.infra.postgres import OWNER_ROLE, PostgresServer
from tests.conftest import ApiCluster
from tests.helpers import ROOT
from tests.test_cli import porpoise

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "taxi"
DATE = "20260115"


@pytest.fixture
def warehouse(api_cluster: ApiCluster, pg_server: PostgresServer) -> str:
    """A database of its own, registered as the `warehouse` data source the example loads into."""
    name = f"warehouse_{Path(api_cluster.work).name}"

    async def create() -> None:
        admin = await asyncpg.connect(pg_server.admin_dsn())
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()
        await pg_server.create_database(name)

    asyncio.run(create())
    dsn = pg_server.dsn_for(OWNER_ROLE, name)  # the example creates its tables there
    api_cluster.client().request("PUT", "/api/v1/datasources/warehouse", {"params": {"dsn": dsn}})
    return dsn


def test_example_pipeline_end_to_end(api_cluster: ApiCluster, warehouse: str, tmp_path: Path) -> None:
    assert porpoise(api_cluster, "apply", str(EXAMPLE / "taxi.yaml")).returncode == 0
    data_root = tmp_path / "data"
    run = porpoise(
        api_cluster, "start", "taxi_daily", "--watch",
        "--param", f"biz_date={DATE}", "--param", "rows=4000",
        "--param", f"data_root={data_root}", "--param", f"example_dir={EXAMPLE}",
        timeout=280,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "finished SUCCESS" in run.stdout and "(4/4 tasks succeeded)" in run.stdout
    day, manifest, trips = check_output(data_root, warehouse)

    # the quality gate really checks: the same day again, but with the clean count in the manifest off by one
    status = api_cluster.client().get("/api/v1/instances", workflow=_code(api_cluster))["items"][0]
    check = next(t for t in api_cluster.client().get(f"/api/v1/instances/{status['id']}")["tasks"]
                 if t["name"] == "quality_check")  # fmt: skip
    assert "data quality check passed" in porpoise(api_cluster, "logs", str(check["id"])).stdout
    manifest["clean"] += 1
    (day / "manifest.json").write_text(json.dumps(manifest))
    rerun = _run_check(day, loaded_trips=trips.num_rows)
    assert rerun.returncode == 1 and "FAIL parquet trips == manifest clean trips" in rerun.stdout
    assert "ok   postgres trips == parquet trips" in rerun.stdout


def check_output(data_root: Path, warehouse: str) -> tuple[Path, dict, pa.Table]:
    """The example's day of data is all there and consistent: Parquet, aggregates, the PostgreSQL table."""
    day = data_root / DATE
    manifest = json.loads((day / "manifest.json").read_text())
    assert manifest["rows"] == 4000 and sum(manifest["dirty"].values()) > 0 and manifest["duplicates"] > 0
    trips = pq.read_table(day / "trips")
    assert trips.num_rows == manifest["clean"]
    assert len(pc.unique(trips["trip_id"])) == trips.num_rows
    assert pc.min(trips["fare"]).as_py() >= 0 and pc.min(trips["duration_min"]).as_py() > 0
    partitions = sorted(p.name for p in (day / "trips" / f"business_date={DATE[:4]}-{DATE[4:6]}-{DATE[6:]}").iterdir())
    assert partitions == ["payment_type=app", "payment_type=card", "payment_type=cash"]
    daily = pq.read_table(day / "daily_zone").to_pylist()

    async def table() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(warehouse)
        try:
            return await conn.fetch("SELECT * FROM daily_zone_stats ORDER BY zone_id")
        finally:
            await conn.close()

    rows = asyncio.run(table())
    assert len(rows) == len(daily) == 40
    assert sum(r["trips"] for r in rows) == trips.num_rows
    for row, agg in zip(rows, sorted(daily, key=lambda a: a["zone_id"]), strict=True):
        assert row["business_date"].strftime("%Y%m%d") == DATE
        assert (row["zone_id"], row["trips"], row["passengers"]) == (agg["zone_id"], agg["trips"], agg["passengers"])
        assert row["total_fare"] == Decimal(str(agg["total_fare"]))
    return day, manifest, trips


def _code(c: ApiCluster) -> int:
    return int(c.client().get("/api/v1/workflows", name="taxi_daily")["items"][0]["code"])


def _run_check(day: Path, loaded_trips: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE / "check_quality.py"), "--day-dir", str(day), "--loaded-trips",
         str(loaded_trips), "--loaded-zones", "40"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip


def test_generator_is_deterministic(tmp_path: Path) -> None:
    for out in ("a", "b"):
        subprocess.run(
            [sys.executable, str(EXAMPLE / "generate.py"), "--date", DATE, "--rows", "3000", "--out",
             str(tmp_path / out)],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    assert (tmp_path / "a" / "trips.csv").read_bytes() == (tmp_path / "b" / "trips.csv").read_bytes()
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    lines = (tmp_path / "a" / "trips.csv").read_text().splitlines()
    assert len(lines) == 1 + manifest["rows"] == 3001
    assert manifest["clean"] + manifest["duplicates"] + sum(manifest["dirty"].values()) == manifest["rows"]
