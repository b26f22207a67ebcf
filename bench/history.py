"""History at scale: the API's list and detail calls, and the master's claim, dispatch and failover figures,
on a database holding a long history, against the same figures on an empty database.

- ``generate``: fills PostgreSQL in SQL (``generate_series`` in chunks of 100,000 instances, the state
  triggers off while it runs, VACUUM ANALYZE after): workflows with ten SHELL tasks in several projects,
  ``instances`` finished runs spread over the last 180 days (2 % FAILURE, some STOP) with ten task instances
  each. Full size: 1,000,000 workflow instances and 10,000,000 task instances.
- master figures, measured on an empty database and on the full one, each with its own master, worker and
  API: claims per second of a backlog of commands whose instances wait in a DEPENDENT task (the claim path,
  bench/scale.py), trigger latency (command -> first task started: claim and dispatch, bench/engine.py),
  throughput of wide workflows (dispatch, bench/engine.py) and master failover (kill -9 of the master owning
  running instances -> all owned by the survivor, bench/failover.py). ``*_vs_empty`` = full / empty.
- API: each call repeated, p50 and p95 in ms, as an admin: the instances list (first page, page 100, a
  keyset page deep in the history, filtered by state, workflow, project, last day), an instance's detail
  with its task instances, a task instance, the workflow list with its last-runs strip, the overview.
- retention (history phase, last): the first batches of a pass with keep_days 90 over the generated history
  (half of it older): instances removed per second and each batch transaction's duration (the nodes run with
  retention off while the figures above are taken).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import psutil

from bench import engine as engine_bench
from bench import failover as failover_bench
from bench import scale as scale_bench
from bench.common import UNGUARDED, bench_config, main, percentile, rounded, workdir
from engine.accounts.tokens import create_token, ensure_user
from engine.infra.postgres import OWNER_ROLE
from engine.infra.stack import Stack
from engine.states import TaskState, WorkflowState
from engine.storage.retention import Retention
from engine.workflows.definitions import save_workflow
from engine.workflows.model import TaskDef, WorkflowDef

SIZES = {
    "tiny": {"instances": 2_000, "workflows": 20, "projects": 4, "repeats": 10, "claims": 100, "triggers": 3,
             "throughput": (2, 10), "failover": 3, "retention_batches": 2},
    "full": {"instances": 1_000_000, "workflows": 200, "projects": 10, "repeats": 100, "claims": 2_000,
             "triggers": 30, "throughput": (20, 50), "failover": 50, "retention_batches": 100},
}  # fmt: skip
TASKS = 10
DAYS = 180
CHUNK = 100_000

_INSTANCES = """
INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version, project_code, state,
    start_time, end_time, schedule_time, host, epoch, command_type, run_times, update_time)
SELECT wf.name || '-' || g, wf.code, wf.version, wf.project_code,
       CASE WHEN g % 50 = 0 THEN 6 WHEN g % 197 = 0 THEN 5 ELSE 7 END,
       $3::timestamptz + g * $4::interval, $3::timestamptz + g * $4::interval + (g % 600) * interval '1 second',
       CASE WHEN g % 2 = 0 THEN $3::timestamptz + g * $4::interval END, 'gone:1', 0,
       CASE WHEN g % 2 = 0 THEN 6 ELSE 0 END, 1, $3::timestamptz + g * $4::interval
FROM generate_series($1::bigint, $2::bigint) g JOIN gen_wf wf ON wf.k = g % {workflows}
"""
_TASKS = f"""
INSERT INTO task_instance (name, task_type, task_code, task_definition_version, workflow_instance_id, state,
    attempt, submit_time, start_time, end_time, host, pid, exit_code, log_path, flag,
    update_time)
SELECT gt.name, 'SHELL', gt.task_code, gt.version, w.id,
       CASE WHEN w.state = {int(WorkflowState.FAILURE)} AND gt.n = {TASKS} THEN {int(TaskState.FAILURE)}
            WHEN w.state = {int(WorkflowState.STOP)} AND gt.n = {TASKS} THEN {int(TaskState.KILL)}
            ELSE {int(TaskState.SUCCESS)} END, 1,
       w.start_time + gt.n * interval '1 second', w.start_time + gt.n * interval '2 second',
       w.start_time + gt.n * interval '3 second', 'gone:2',
       1000 + gt.n, 0, '/gone/' || w.id || '/' || gt.n || '.log', 1, w.end_time
FROM workflow_instance w JOIN gen_tasks gt ON gt.code = w.workflow_definition_code
WHERE w.id BETWEEN $1 AND $2
"""


async def generate(dsn: str, instances: int, workflows: int, projects: int) -> dict[str, float]:
    """Definitions, then ``instances`` finished runs of them with TASKS task instances each."""
    t0 = time.monotonic()
    conn = await asyncpg.connect(dsn, command_timeout=3600)
    try:
        for i in range(workflows):
            tasks = tuple(TaskDef(f"t{j + 1}", "SHELL", {"rawScript": "true"}, upstream=(f"t{j}",) if j else ())
                          for j in range(TASKS))  # fmt: skip
            await save_workflow(conn, WorkflowDef(f"hist_{i}", f"hist_p{i % projects}", tasks), release=True)
        await conn.execute(
            "CREATE TEMP TABLE gen_wf AS SELECT (row_number() OVER (ORDER BY d.code) - 1) AS k, d.code, d.version,"
            " d.project_code, d.name FROM workflow_definition d WHERE d.name LIKE 'hist\\_%'"
        )
        await conn.execute(
            "CREATE TEMP TABLE gen_tasks AS SELECT r.workflow_definition_code AS code, t.code AS task_code, t.version,"
            " t.name, row_number() OVER (PARTITION BY r.workflow_definition_code ORDER BY t.name) AS n"
            " FROM workflow_task_relation r JOIN task_definition t ON t.code = r.post_task_code"
            " WHERE r.workflow_definition_code IN (SELECT code FROM gen_wf)"
        )
        start = dt.datetime.now(dt.UTC) - dt.timedelta(days=DAYS)
        step = dt.timedelta(days=DAYS) / max(instances, 1)
        statement = _INSTANCES.replace("{workflows}", str(workflows))
        for table in ("workflow_instance", "task_instance"):
            await conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")  # no live-update flood
        try:
            for lo in range(1, instances + 1, CHUNK):
                hi = min(instances, lo + CHUNK - 1)
                async with conn.transaction():
                    first = await conn.fetchval("SELECT coalesce(max(id), 0) + 1 FROM workflow_instance")
                    await conn.execute(statement, lo, hi, start, step)
                    last = await conn.fetchval("SELECT max(id) FROM workflow_instance")
                    await conn.execute(_TASKS, first, last)
        finally:
            for table in ("workflow_instance", "task_instance"):
                await conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
        generated = time.monotonic() - t0
        await conn.execute("VACUUM ANALYZE workflow_instance")
        await conn.execute("VACUUM ANALYZE task_instance")
        counts = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM workflow_instance) AS w, (SELECT count(*) FROM task_instance) AS t"
        )
    finally:
        await conn.close()
    return {
        "generated_workflow_instances": int(counts["w"]),
        "generated_task_instances": int(counts["t"]),
        "generate_s": generated,
        "generate_and_vacuum_s": time.monotonic() - t0,
    }


async def _calls(dsn: str) -> list[tuple[str, Any]]:
    """(label, path maker) of the API calls measured; path makers draw their ids at random."""
    conn = await asyncpg.connect(dsn)
    try:
        span = await conn.fetchrow("SELECT min(id) AS lo, max(id) AS hi FROM workflow_instance")
        tasks = await conn.fetchrow("SELECT min(id) AS lo, max(id) AS hi FROM task_instance")
        codes = [r["code"] for r in await conn.fetch("SELECT code FROM workflow_definition WHERE name LIKE 'hist%'")]
        projects = [r["name"] for r in await conn.fetch("SELECT name FROM project WHERE name LIKE 'hist%'")]
    finally:
        await conn.close()
    rng = random.Random(18)
    lo, hi = int(span["lo"] or 1), int(span["hi"] or 1)
    since = (dt.datetime.now(dt.UTC) - dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")
    calls = [
        ("instances_first_page", lambda: "/api/v1/instances?size=50"),
        ("instances_page_100", lambda: "/api/v1/instances?size=50&page=100"),
        ("instances_deep_keyset", lambda: f"/api/v1/instances?size=50&before={rng.randint(lo, hi)}"),
        ("instances_failed", lambda: "/api/v1/instances?size=50&state=FAILURE"),
        ("instances_of_workflow", lambda: f"/api/v1/instances?size=50&workflow={rng.choice(codes)}"),
        ("instances_of_workflow_page_20", lambda: f"/api/v1/instances?size=50&page=20&workflow={rng.choice(codes)}"),
        ("instances_of_project", lambda: f"/api/v1/instances?size=50&project={rng.choice(projects)}"),
        ("instances_last_day", lambda: f"/api/v1/instances?size=50&since={since}"),
        ("instance_detail", lambda: f"/api/v1/instances/{rng.randint(lo, hi)}"),
        ("task_instance", lambda: f"/api/v1/tasks/{rng.randint(int(tasks['lo'] or 1), int(tasks['hi'] or 1))}"),
        ("workflows_with_last_runs", lambda: "/api/v1/workflows?size=50"),
        ("overview", lambda: "/api/v1/overview"),
    ]
    if span["hi"] is None:  # no runs (the empty database): nothing to show the detail of
        calls = [c for c in calls if c[0] not in ("instance_detail", "task_instance")]
    return calls


async def api_latencies(dsn: str, api_url: str, repeats: int) -> dict[str, float]:
    conn = await asyncpg.connect(dsn)
    try:
        _, token = await create_token(conn, await ensure_user(conn), f"bench-{uuid.uuid4().hex[:6]}")
    finally:
        await conn.close()
    out: dict[str, float] = {}
    worst = 0.0
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        for label, path in await _calls(dsn):
            took = []
            for i in range(repeats + 2):
                sent = time.perf_counter()
                async with http.get(api_url + path()) as resp:
                    await resp.read()
                    if resp.status != 200:
                        raise RuntimeError(f"{label}: {resp.status} {await resp.text()}")
                if i >= 2:  # the first two warm the connection and the API's caches
                    took.append((time.perf_counter() - sent) * 1000)
            out[f"api_{label}_p50_ms"] = percentile(took, 50)
            out[f"api_{label}_p95_ms"] = percentile(took, 95)
            worst = max(worst, out[f"api_{label}_p95_ms"])
    out["api_worst_p95_ms"] = worst
    return out


def _phase(stack: Stack, base: Path, name: str, params: dict[str, Any], history: bool) -> dict[str, Any]:
    """Fresh database (its runs generated when ``history``), its own master, worker and API; the figures."""
    dsn = asyncio.run(scale_bench._fresh_db(stack))
    # the same definitions in both; runs only in the history phase
    instances = params["instances"] if history else 0
    assert stack.postgres is not None
    # as the schema owner: the generator turns the tables' triggers off while it fills them, then VACUUMs
    owner = stack.postgres.dsn_for(OWNER_ROLE, dsn.rsplit("/", 1)[1])
    result: dict[str, Any] = asyncio.run(generate(owner, instances, params["workflows"], params["projects"]))
    # retention off while the engine is measured (its own figures come last, from a pass run here)
    db = [f"database.dsn={dsn}", "logging.level=warning", "history.keep_days=0"]
    master = stack.start_node("master", f"{name}-master", [*db, *UNGUARDED["master"]])
    worker = stack.start_node("worker", f"{name}-worker", [*db, "worker.exec_slots=400", *UNGUARDED["worker"]])
    api = stack.start_node("api", f"{name}-api", db)
    try:
        assert api.record is not None and master.record is not None and worker.record is not None
        api_url = f"http://127.0.0.1:{api.record.extra['port']}"
        result |= asyncio.run(api_latencies(dsn, api_url, params["repeats"]))
        result |= asyncio.run(engine_bench._trigger(dsn, params["triggers"]))
        procs = [psutil.Process(p.record.pid) for p in (master, worker) if p.record]
        workflows, tasks = params["throughput"]
        figures = asyncio.run(engine_bench._throughput(dsn, workflows, tasks, procs))
        result |= {k: figures[k] for k in ("throughput_tasks_per_s", "throughput_all_success")}
        result |= _claims(dsn, params["claims"])
        here = stack.tenant_dir("bench")  # the gated tasks (run as the stack's tenant) write their ledger here
        gate, ledger = here / f"{name}-gate", here / f"{name}-ledger"
        survivor = (f"{name}-master-2", [*db, *UNGUARDED["master"]])
        failover = asyncio.run(
            failover_bench._master_failover(stack, dsn, params["failover"], gate, ledger, master, survivor)
        )
        result |= {k: failover[k] for k in ("master_failover_owned_s", "master_failover_gated_reruns")}
        if history:
            result |= asyncio.run(retention_pass(dsn, params["retention_batches"]))
    finally:
        for proc in stack.nodes:
            if proc.exited() is None and proc.name.startswith(name):
                proc.stop(15)
    return result


async def retention_pass(dsn: str, batches: int, keep_days: int = 90) -> dict[str, float]:
    """The first ``batches`` batches of a retention pass over the generated history (half of it is older than
    90 days): instances removed per second, and how long each batch's transaction (its locks) lasted."""
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    spans: list[float] = []
    last = time.perf_counter()

    def go_on() -> bool:
        nonlocal last
        now = time.perf_counter()
        spans.append((now - last) * 1000)
        last = now
        return len(spans) <= batches

    try:
        t0 = time.perf_counter()
        removed = await Retention(pool, keep_days, 0, 500, go_on=go_on).run()
        seconds = time.perf_counter() - t0
    finally:
        await pool.close()
    return {
        "retention_instances_removed": removed.instances,
        "retention_instances_per_s": removed.instances / seconds,
        "retention_batch_p95_ms": percentile(spans[1:], 95),
        "retention_batch_max_ms": max(spans[1:], default=0.0),
    }


def _claims(dsn: str, n: int) -> dict[str, float]:
    """Claims per second of ``n`` commands at once (bench/scale.py's round)."""
    code = asyncio.run(scale_bench._waiting_workflow(dsn))
    seconds, _ = asyncio.run(scale_bench._claim_round(dsn, code, n, 900))
    return {"claims_per_s": n / seconds}


COMPARED = ("claims_per_s", "trigger_p50_ms", "trigger_p99_ms", "throughput_tasks_per_s", "master_failover_owned_s")


def run(size: str = "full") -> dict[str, Any]:
    params = SIZES[size]
    cfg = bench_config()
    result: dict[str, Any] = {"benchmark": "history", "size": size}
    with workdir() as base:
        stack = Stack(Path(base) / "stack", cfg)
        try:
            stack.start_infra()
            empty = _phase(stack, Path(base), "empty", params, history=False)
            full = _phase(stack, Path(base), "history", params, history=True)
        finally:
            stack.stop_all()
    result |= {f"empty_{k}": v for k, v in empty.items()}
    result |= {f"history_{k}": v for k, v in full.items()}
    for key in COMPARED:
        result[f"{key}_history_vs_empty"] = full[key] / empty[key] if empty[key] else float("nan")
    return rounded(result)


if __name__ == "__main__":
    main(run)
