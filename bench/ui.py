"""Web UI timings in real headless Chromium (ui/tests/e2e/perf.mjs) against real master, worker and API
processes on private etcd + PostgreSQL:

- instance_1000_*: opening the page of a 1,000-task instance (a layered DAG, run as a dry run), from
  navigation start to the graph drawn and the task table filled; cold (layout computed) and warm (the
  layout cached for the version); the longest main-thread task and the blocking time (sum over 50 ms);
  *_layout_start_ms / *_layout_ms: when the layout (in its worker) was asked for and how long it took (the
  ``porpoise:layout:*`` performance measures; absent when the layout came from a cache).
- editor_1000_*: the graph editor on that workflow: open (graph drawn; the layout cached for the version),
  add a task (click -> node on screen), link it by dragging (release -> edge drawn), lay the 1,001 tasks out
  again in the layout worker, and the longest main-thread task over those steps.
- list_after_data_ms: the instances list on screen after its API answer arrived.
- state_change_on_screen_ms: a workflow instance's state committed in the database -> shown in the list
  (trigger -> NOTIFY -> API server batch -> server-sent event -> query cache -> DOM).
- initial_js_gzip_kb: the JavaScript index.html loads, gzipped (the layout worker loads later).

A/B comparison of UI builds against one API (same cluster, same data, same minute): set
``BENCH_UI_DISTS=label=dir,label=dir`` (each dir a built ``ui/dist``, e.g. of an old commit:
``git archive <commit> ui | tar -x -C /tmp/old && ln -s $PWD/ui/node_modules /tmp/old/ui/ && (cd /tmp/old/ui
&& npm run build)``) and ``BENCH_UI_ROUNDS=n`` (default 3). One API node serves each dir (``api.ui_dir``); the
rounds run perf.mjs against each build in turn, in an order rotated every round, and the result holds each
build's medians under its label (plus ``runs``: every round's figures). ``BENCH_UI_WATERFALL=1``: each run
also lists the cold instance page's requests (path, start, end in ms since navigation).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import asyncpg

from bench.common import main, rounded, save_released, workdir
from engine import config as config_mod
from engine.accounts.tokens import create_token, ensure_user
from engine.infra.ports import free_port
from engine.infra.process import wait_until
from engine.infra.stack import Stack
from engine.states import WorkflowState
from engine.workflows.model import TaskDef

UI = Path(__file__).resolve().parent.parent / "ui"
SIZES = {"tiny": {"tasks": 100}, "full": {"tasks": 1000}}


def layered(tasks: int, width: int = 20) -> list[TaskDef]:
    """``tasks`` SHELL tasks in layers of ``width``; each depends on two tasks of the layer before."""
    out = []
    for i in range(tasks):
        layer, pos = divmod(i, width)
        up = (
            ()
            if layer == 0
            else tuple({f"t{(layer - 1) * width + pos}", f"t{(layer - 1) * width + (pos + 1) % width}"})
        )
        out.append(TaskDef(f"t{i}", "SHELL", {"rawScript": "true"}, upstream=up))
    return out


def initial_js_gzip_kb(dist: Path = UI / "dist") -> float:
    index = (dist / "index.html").read_text()
    files = set(re.findall(r'(?:src|href)="\./(assets/[^"]+\.js)"', index))
    return sum(len(gzip.compress((dist / f).read_bytes())) for f in files) / 1024


async def _prepare(dsn: str, tasks: int) -> tuple[str, int, int]:
    conn = await asyncpg.connect(dsn)
    try:
        _, token = await create_token(conn, await ensure_user(conn), "bench-ui")
        big = await save_released(conn, "ui_big", layered(tasks))
        small = await save_released(conn, "ui_small", [TaskDef("one", "SHELL", {"rawScript": "true"})])
    finally:
        await conn.close()
    return token, big, small


def _call(url: str, token: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def _run_to_end(url: str, token: str, code: int, body: dict[str, Any], timeout: float) -> int:
    command = _call(url, token, "POST", f"/api/v1/workflows/{code}/start", body)["command_id"]
    found: dict[str, Any] = {}

    def done() -> bool:
        status = _call(url, token, "GET", f"/api/v1/commands/{command}")
        if status["workflow_instance_id"] is None:
            return False
        found.update(_call(url, token, "GET", f"/api/v1/instances/{status['workflow_instance_id']}"))
        return bool(found["finished"])

    wait_until(done, timeout, interval=0.5, what=f"instance of workflow {code} finished")
    return int(found["id"])


async def _set_state(dsn: str, instance: int, state: WorkflowState) -> float:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("UPDATE workflow_instance SET state = $2 WHERE id = $1", instance, state)
        return time.time() * 1000
    finally:
        await conn.close()


def _browse(url: str, token: str, big_instance: int, big: int, flip: int, chromium: str, dsn: str) -> dict[str, Any]:
    """One perf.mjs run against the UI ``url`` serves; ``flip`` must be SUCCESS (it ends FAILURE)."""
    env = {"PORPOISE_URL": url, "PORPOISE_TOKEN": token, "BIG_INSTANCE": str(big_instance),
           "BIG_WORKFLOW": str(big), "FLIP_INSTANCE": str(flip), "CHROMIUM": chromium,
           "PATH": "/usr/bin:/bin", "WATERFALL": os.environ.get("BENCH_UI_WATERFALL", "")}  # fmt: skip
    with subprocess.Popen(
        ["node", "tests/e2e/perf.mjs"],
        cwd=UI,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:  # the context closes the pipes
        assert proc.stdin is not None and proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        proc.stdin.write(f"GO {asyncio.run(_set_state(dsn, flip, WorkflowState.FAILURE))}\n")
        proc.stdin.flush()
        out: dict[str, Any] = json.loads(proc.stdout.readline())
        proc.stdin.close()
        proc.wait(60)
    return out


def _dists() -> dict[str, Path]:
    """``BENCH_UI_DISTS=label=dir,...``: the builds to compare (none: the checkout's ui/dist alone)."""
    dists = {}
    for item in filter(None, os.environ.get("BENCH_UI_DISTS", "").split(",")):
        label, sep, directory = item.partition("=")
        dist = Path(directory).resolve()
        if not sep or not (dist / "index.html").is_file():
            raise SystemExit(f"bench ui: BENCH_UI_DISTS item {item!r} is not label=<a built ui dist>")
        dists[label] = dist
    return dists


def run(size: str = "full") -> dict[str, Any]:
    chromium = shutil.which("chromium")
    dists = _dists()
    if chromium is None or not (dists or (UI / "dist" / "index.html").is_file()):
        raise SystemExit("bench ui: needs Chromium and the built UI (make install)")
    params = SIZES[size]
    cfg = config_mod.load(environ={})
    result: dict[str, Any] = {"benchmark": "ui", "size": size, "tasks": params["tasks"]}
    with workdir() as base:
        stack = Stack(Path(base) / "stack", cfg)
        try:
            stack.start_infra()
            assert stack.postgres is not None
            dsn = stack.postgres.dsn
            quiet = ["logging.level=warning"]
            stack.start_node("master", "master", quiet)
            stack.start_node("worker", "worker", quiet)
            port = stack.api_port()
            stack.start_node("api", "api", quiet, port=port)
            url = f"http://127.0.0.1:{port}"
            token, big, small = asyncio.run(_prepare(dsn, params["tasks"]))
            big_instance = _run_to_end(url, token, big, {"dry_run": True}, 600)
            flip = _run_to_end(url, token, small, {}, 60)
            if not dists:
                result |= _browse(url, token, big_instance, big, flip, chromium, dsn)
                result["initial_js_gzip_kb"] = initial_js_gzip_kb()
                return rounded(result)
            urls = {}
            for label, dist in dists.items():  # one API node per build, over the same cluster and data
                api_port = free_port()
                stack.start_node("api", f"api-{label}", [*quiet, f"api.ui_dir={dist}"], port=api_port)
                urls[label] = f"http://127.0.0.1:{api_port}"
            runs: dict[str, list[dict[str, Any]]] = {label: [] for label in dists}
            labels = list(dists)
            for i in range(int(os.environ.get("BENCH_UI_ROUNDS", "3"))):
                for label in labels[i % len(labels) :] + labels[: i % len(labels)]:
                    asyncio.run(_set_state(dsn, flip, WorkflowState.SUCCESS))
                    runs[label].append(_browse(urls[label], token, big_instance, big, flip, chromium, dsn))
            for label, figures in runs.items():
                result[label] = {
                    key: statistics.median(f[key] for f in figures if key in f)
                    for key, value in figures[0].items()
                    if isinstance(value, int | float) and all(key in f for f in figures)
                } | {"initial_js_gzip_kb": initial_js_gzip_kb(dists[label])}
            result["runs"] = runs
        finally:
            stack.stop_all()
    return rounded(result)


if __name__ == "__main__":
    main(run)
