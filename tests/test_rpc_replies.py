"""The typed RPC boundary: every request names its reply dataclass, every registered handler is declared
to return it and the server sends nothing else, ``RpcClient.call`` gives that dataclass back, and the JSON
on the wire keeps the field names older nodes read (in-process servers on loopback; no cluster)."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import typing
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from engine import config
from engine.master.server import Master
from engine.worker.server import Worker
from rpc import BadRequest, RpcClient, RpcError, RpcServer, codec, messages
from rpc.messages import ControlReply, Done, LogRemoved, Raw, Request, WorkflowControl
from tests.helpers import TEST_SECRET

ALL_REQUESTS = [
    c for c in vars(messages).values() if isinstance(c, type) and issubclass(c, Request) and c is not Request
]


def _node_config(tmp_path: Path) -> config.Config:
    dirs = [f"worker.log_dir={tmp_path / 'logs'}", f"worker.exec_dir={tmp_path / 'exec'}"]
    return config.load(overrides=[f"rpc.secret={TEST_SECRET}", *dirs], environ={})


def test_every_request_names_a_reply_dataclass() -> None:
    assert len(ALL_REQUESTS) >= 15
    for cls in ALL_REQUESTS:
        assert isinstance(cls.METHOD, str) and cls.METHOD, cls
        assert cls.REPLY is Raw or dataclasses.is_dataclass(cls.REPLY), f"{cls.__name__}.REPLY is {cls.REPLY!r}"
    assert len({c.METHOD for c in ALL_REQUESTS}) == len(ALL_REQUESTS)


@pytest.mark.parametrize("role", [Master, Worker])
async def test_every_registered_handler_returns_its_request_s_reply_type(role: type[Any], tmp_path: Path) -> None:
    node = role(_node_config(tmp_path))
    try:
        registered = node.rpc_server.registrations()
        assert registered, f"{role.__name__} registers no RPC handler"
        for msg_cls, handler in registered.items():
            declared = typing.get_type_hints(handler).get("return")
            want = web.StreamResponse if msg_cls.REPLY is Raw else msg_cls.REPLY
            assert declared is want, f"{role.__name__}: {msg_cls.METHOD} handler returns {declared!r}, not {want!r}"
            assert inspect.iscoroutinefunction(handler), msg_cls.METHOD
    finally:
        await node.rpc.close()


def test_register_refuses_what_is_not_a_typed_request() -> None:
    @dataclasses.dataclass(frozen=True)
    class Untyped:
        METHOD: typing.ClassVar[str] = "untyped"

    async def handle(_: Untyped) -> dict[str, bool]:
        return {"ok": True}

    with pytest.raises(TypeError, match="not a request message"):
        RpcServer(web.Application(), TEST_SECRET).register(Untyped, handle)


@pytest.fixture
async def client() -> AsyncIterator[RpcClient]:
    rpc = RpcClient(TEST_SECRET)
    try:
        yield rpc
    finally:
        await rpc.close()


@contextlib.asynccontextmanager
async def _listening(app: web.Application) -> AsyncIterator[str]:
    """``app`` served on loopback; its address."""
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        yield f"127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def _serving(handler: Callable[[WorkflowControl], Awaitable[Any]]) -> web.Application:
    app = web.Application()
    RpcServer(app, TEST_SECRET).register(WorkflowControl, handler)
    return app


async def test_call_returns_the_request_s_reply_dataclass(client: RpcClient) -> None:
    async def control(msg: WorkflowControl) -> ControlReply:
        return ControlReply(False, f"no instance {msg.workflow_instance_id}")

    async with _listening(_serving(control)) as address:
        assert await client.call(address, WorkflowControl(7, "stop")) == ControlReply(False, "no instance 7")


async def test_a_handler_answering_a_dict_is_refused_500(client: RpcClient) -> None:
    async def control(_: WorkflowControl) -> Any:
        return {"accepted": True}

    async with _listening(_serving(control)) as address:
        with pytest.raises(RpcError, match="HTTP 500") as caught:
            await client.call(address, WorkflowControl(7, "stop"))
    assert caught.value.maybe_delivered  # the handler ran


async def test_call_of_a_raw_request_says_to_fetch(client: RpcClient) -> None:
    with pytest.raises(TypeError, match="use fetch or stream"):
        await client.call("127.0.0.1:1", messages.LogDownload("x.log"))


async def test_a_reply_from_a_neighbouring_release_is_read(client: RpcClient) -> None:
    """Rolling upgrade: a node of another release may answer without a field this one added, or with one
    it does not know; the reply still decodes (missing fields take their defaults, unknown ones are
    ignored)."""

    async def older(_: web.Request) -> web.Response:
        return web.json_response({"accepted": True})  # an older master: no "reason"

    async def newer(_: web.Request) -> web.Response:
        return web.json_response({"ok": True, "when": 5})  # a newer one: a field this release lacks

    app = web.Application()  # plain routes answering as those nodes would (signatures unchecked)
    app.router.add_post("/rpc/workflow.control", older)
    app.router.add_post("/rpc/cache.expire", newer)
    async with _listening(app) as address:
        assert await client.call(address, WorkflowControl(7, "stop")) == ControlReply(True, "")
        assert await client.call(address, messages.CacheExpire(9)) == Done(True)


async def test_a_host_update_reply_without_its_known_attempts_is_unreadable(client: RpcClient) -> None:
    # "{}" must not read as "this worker knows none of the attempts": the failover would run them all again
    async def empty(_: web.Request) -> web.Response:
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/rpc/task.host_update", empty)
    async with _listening(app) as address:
        with pytest.raises(RpcError, match="unreadable reply"):
            await client.call(address, messages.HostUpdate(1, "m:1", 2))


def test_replies_keep_the_json_field_names_older_nodes_read() -> None:
    # an older API reads reply["accepted"] / reply.get("reason"), an older worker reply["ack"] / ["owner"]
    assert json.loads(codec.dumps_reply(ControlReply(False, "why"))) == {"accepted": False, "reason": "why"}
    assert json.loads(codec.dumps_reply(Done(True))) == {"ok": True}
    assert json.loads(codec.dumps_reply(LogRemoved(True))) == {"removed": True}
    assert json.loads(codec.dumps_reply(messages.ReportReply(False, "m:1", 3))) == {
        "ack": False,
        "owner": "m:1",
        "epoch": 3,
    }


def test_a_field_an_older_release_still_sends_is_ignored_others_refused() -> None:
    # an older master's dispatch carries first_submit_time (always 0, read by no worker): a newer worker
    # takes it during a rolling upgrade; a field nobody ever sent is still a 400
    msg = messages.TaskDispatch(1, 1, 2, 3, 4, "t", "SHELL", {"rawScript": "true"}, "m:1")
    body = {**codec.encode(msg), "first_submit_time": 0}
    assert codec.decode(messages.TaskDispatch, body) == msg
    with pytest.raises(BadRequest, match="unknown fields"):
        codec.decode(messages.TaskDispatch, {**body, "second_submit_time": 0})
