"""The HTTP task: parameter checks and answer checks as tables, then real runs on a real worker
(api_cluster) against a real HTTP server on loopback: the request arrives as written, secrets stay out
of the log, values flow downstream, failed checks fail the task (and retry), a hung server is cut off by
the request timeout, and stopping the instance kills a request in flight."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from engine.tasks.base import ParamError
from engine.tasks.http import HttpTask, parse_json_path
from engine.tasks.http_runner import CheckFailed, verdict
from porpoise import Client, Http, Shell, Task, Workflow
from tests.conftest import ApiCluster
from tests.helpers import wait_sync

PROJECT = "http-tests"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "url"),
        ({"url": "ftp://x"}, "url"),
        ({"url": "http://x", "httpMethod": "BREW"}, "httpMethod"),
        ({"url": "http://x", "headers": {"a": {"b": 1}}}, "headers.a"),
        ({"url": "http://x", "body": 5}, "body"),
        ({"url": "http://x", "body": "a=b", "bodyType": "form"}, "body"),
        ({"url": "http://x", "bodyType": "xml"}, "bodyType"),
        ({"url": "http://x", "timeoutSeconds": 0}, "timeoutSeconds"),
        ({"url": "http://x", "expectedStatus": [99]}, "expectedStatus"),
        ({"url": "http://x", "check": {"contains": "a", "equals": "b"}}, "check"),
        ({"url": "http://x", "check": {"json_path": "data.id", "equals": 1}}, "check.json_path"),
        ({"url": "http://x", "extract": {"id": "$.a..b"}}, "extract.id"),
        ({"url": "http://x", "maxLogBytes": -1}, "maxLogBytes"),
    ],
)
def test_bad_parameters_are_refused_naming_the_field(params: dict[str, Any], field: str) -> None:
    with pytest.raises(ParamError) as err:
        HttpTask.validate(params)
    assert err.value.field == field


def test_good_parameters_pass() -> None:
    HttpTask.validate({"url": "${base}/x", "httpMethod": "post", "headers": {"X": 1}, "body": {"a": [1]},
                       "expectedStatus": [200, 404], "check": {"json_path": "$.a[0]", "equals": 1},
                       "extract": {"v": "$['a'][0]"}, "timeoutSeconds": 0.5})  # fmt: skip


def test_json_paths() -> None:
    assert parse_json_path("$") == []
    assert parse_json_path("$.data.items[2]['odd key'].id") == ["data", "items", 2, "odd key", "id"]
    with pytest.raises(ValueError, match="cannot read"):
        parse_json_path("$.a b")


_JOB = {"expected": [], "check": {}, "extract": {}}


@pytest.mark.parametrize(
    ("job", "status", "body", "outcome"),
    [
        ({}, 200, b"ok", {}),
        ({}, 204, b"", {}),
        ({}, 500, b"boom", "status 500 is not the expected 2xx"),
        ({"expected": [404]}, 404, b"", {}),
        ({"expected": [404]}, 200, b"", "status 200 is not the expected 404"),
        ({"check": {"contains": "DONE"}}, 200, b"state DONE", {}),
        ({"check": {"contains": "DONE"}}, 200, b"state RUNNING", "does not contain 'DONE'"),
        ({"check": {"not_contains": "error"}}, 200, b"an error", "contains 'error'"),
        ({"check": {"json_path": "$.s", "equals": "DONE"}}, 200, b'{"s": "DONE"}', {}),
        ({"check": {"json_path": "$.n", "equals": 3}}, 200, b'{"n": 3}', {}),
        ({"check": {"json_path": "$.s", "equals": "DONE"}}, 200, b'{"s": "RUN"}', "is 'RUN', expected 'DONE'"),
        ({"check": {"json_path": "$.x", "equals": 1}}, 200, b"{}", "nothing at 'x'"),
        ({"extract": {"id": "$.d[1].id", "ok": "$.ok", "all": "$.d[0]"}}, 200,
         b'{"d": [{"id": 1}, {"id": 7}], "ok": true}', {"id": "7", "ok": "true", "all": '{"id":1}'}),
        ({"extract": {"id": "$.id"}}, 200, b"not json", "not JSON"),
    ],
)  # fmt: skip
def test_answer_checks(job: dict[str, Any], status: int, body: bytes, outcome: Any) -> None:
    merged = {**_JOB, **job}
    if isinstance(outcome, dict):
        assert verdict(merged, status, body) == outcome
    else:
        with pytest.raises(CheckFailed, match=outcome):
            verdict(merged, status, body)


# -- real runs -------------------------------------------------------------------------------------


@dataclass
class Server:
    """A real aiohttp server on loopback, run in a thread; it records what it received."""

    url: str = ""
    received: list[dict[str, Any]] = field(default_factory=list)
    #: paths whose requests wait here until the test sets the event
    hold: threading.Event = field(default_factory=threading.Event)
    fail_first: dict[str, int] = field(default_factory=dict)


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server()
    ready = threading.Event()
    loop = asyncio.new_event_loop()

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        state.received.append({"method": request.method, "path": request.path, "query": dict(request.query),
                               "headers": dict(request.headers), "body": body.decode()})  # fmt: skip
        if request.path == "/slow":
            await loop.run_in_executor(None, state.hold.wait, 30)
            return web.json_response({"late": True})
        if request.path == "/flaky" and state.fail_first.get("/flaky", 0) > 0:
            state.fail_first["/flaky"] -= 1
            return web.json_response({"state": "BUSY"}, status=503)
        return web.json_response({"job": {"id": 4711, "state": "DONE"}, "echo": body.decode()})

    async def main() -> web.AppRunner:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        state.url = f"http://127.0.0.1:{port}"
        return runner

    def run() -> None:
        asyncio.set_event_loop(loop)
        runner = loop.run_until_complete(main())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    yield state
    state.hold.set()
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def _wf(api_cluster: ApiCluster, prefix: str) -> Workflow:
    return Workflow(f"{prefix}_{uuid.uuid4().hex[:8]}", project=PROJECT, client=Client(api=api_cluster.client()))


@pytest.mark.slow
def test_a_request_runs_checks_and_passes_values_downstream(api_cluster: ApiCluster, server: Server) -> None:
    with _wf(api_cluster, "http_ok") as wf:
        call = Http("call", server.url + "/jobs/${day}", method="POST", query={"mode": "full"},
                    headers={"Authorization": "Bearer s3cr3t-token", "X-Trace": "t-1"}, body={"day": "${day}", "n": 2},
                    check={"json_path": "$.job.state", "equals": "DONE"}, extract={"job_id": "$.job.id"},
                    inputs={"day": "20260115"})  # fmt: skip
        use = Shell("use", "echo got job ${job_id}")
        call >> use
    wf.apply()
    run = wf.start(wait=True, timeout=60)
    assert run.state == "SUCCESS", [(t.name, t.state) for t in run.tasks]
    [req] = server.received
    assert (req["method"], req["path"], req["query"]) == ("POST", "/jobs/20260115", {"mode": "full"})
    assert req["headers"]["Authorization"] == "Bearer s3cr3t-token" and req["headers"]["X-Trace"] == "t-1"
    assert json.loads(req["body"]) == {"day": "20260115", "n": 2}
    assert req["headers"]["Content-Type"] == "application/json"
    log = run.task("call").log()
    assert "HTTP 200" in log and "4711" in log and "Authorization: ***" in log and "X-Trace: t-1" in log
    assert "s3cr3t" not in log
    assert "got job 4711" in run.task("use").log()


@pytest.mark.slow
def test_failed_checks_fail_and_retry_timeouts_and_stop(api_cluster: ApiCluster, server: Server) -> None:
    server.fail_first["/flaky"] = 1
    with _wf(api_cluster, "http_retry") as wf:
        Task("call", "HTTP", {"url": server.url + "/flaky"}, retries=1, retry_interval=0)
    wf.apply()
    run = wf.start(wait=True, timeout=60)
    attempts = api_cluster.client().get(f"/api/v1/instances/{run.id}", all_attempts=True)["tasks"]
    assert run.state == "SUCCESS" and sorted(a["state"] for a in attempts) == ["FAILURE", "SUCCESS"]
    first = next(a for a in attempts if a["state"] == "FAILURE")
    assert "status 503 is not the expected 2xx" in run.client.api.get(f"/api/v1/tasks/{first['id']}/log")["lines"][-2]

    with _wf(api_cluster, "http_check") as wf:
        Task("call", "HTTP", {"url": server.url + "/x", "check": {"contains": "NOPE"}})
    wf.apply()
    failed = wf.start(wait=True, timeout=60)
    assert failed.state == "FAILURE" and "does not contain 'NOPE'" in failed.task("call").log()

    with _wf(api_cluster, "http_timeout") as wf:
        Task("call", "HTTP", {"url": server.url + "/slow", "timeoutSeconds": 0.5})
    wf.apply()
    timed_out = wf.start(wait=True, timeout=60)
    assert timed_out.state == "FAILURE" and "request failed" in timed_out.task("call").log()

    with _wf(api_cluster, "http_stop") as wf:
        Task("call", "HTTP", {"url": server.url + "/slow", "timeoutSeconds": 60})
    wf.apply()
    held = wf.start()
    wait_sync(lambda: sum(r["path"] == "/slow" for r in server.received) == 2, 30, what="second /slow request")
    held.stop()
    assert held.wait(60).state == "STOP" and held.task("call").state == "KILL"
