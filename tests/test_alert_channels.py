"""Alert channels against a real HTTP receiver on loopback: each request checked against the format its service
documents, signatures recomputed here from the request; refusals, garbage answers, a receiver that is down or
slow end in a SendError with the reason. SCRIPT runs a real executable with the alert on stdin. Then the API:
editing a group keeps its masked secrets, "send a test alert" reports each sender, SCRIPT needs its directory."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote_plus, urlsplit

import pytest
from aiohttp import web

from engine.alerts.channels import dingtalk_signed
from engine.alerts.netguard import AddressPolicy
from engine.alerts.senders import SECRET_KEYS, SendError, plugins, validate
from engine.infra.ports import free_port
from engine.tasks.base import ParamError
from tests.conftest import ApiCluster
from tests.helpers import wait_sync
from tests.test_api import error_of
from tests.test_cli import porpoise
from tests.test_users_e2e import make_user

LOOPBACK = AddressPolicy(["127.0.0.0/8"])
ALERT = {
    "id": 41, "title": "start process failed", "content": "workflow nightly, task load: FAILURE",
    "alert_type": 0, "alert_type_name": "PROCESS_INSTANCE_FAILURE", "workflow_instance_id": 9001,
    "link": "https://porpoise.example.com/instances/9001",
}  # fmt: skip


@dataclass
class Receiver:
    url: str
    #: (method, path with query, headers, JSON body or None) of every request
    seen: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)
    #: path -> (status, JSON answer); a path not listed answers 200 {"ok": true, "errcode": 0, "code": 0}
    answers: dict[str, tuple[int, Any]] = field(default_factory=dict)
    #: seconds a path waits before answering (or until the receiver closes: its teardown waits for no stall)
    stall: dict[str, float] = field(default_factory=dict)
    closing: asyncio.Event = field(default_factory=asyncio.Event)


def _app(box: Receiver) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw) if raw else None
        box.seen.append((request.method, request.path_qs, dict(request.headers), body))
        if request.path in box.stall:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(box.closing.wait(), box.stall[request.path])
        status, answer = box.answers.get(request.path, (200, {"ok": True, "errcode": 0, "code": 0}))
        if isinstance(answer, str):
            return web.Response(status=status, text=answer)
        return web.json_response(answer, status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


@asynccontextmanager
async def _serving(box: Receiver) -> AsyncIterator[Receiver]:
    runner = web.AppRunner(_app(box), access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    box.url = f"http://127.0.0.1:{port}"
    try:
        yield box
    finally:
        box.closing.set()
        await runner.cleanup()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """The receiver on the test's own loop (for tests that await the senders)."""
    async with _serving(Receiver(url="")) as box:
        yield box


@pytest.fixture
def threaded_receiver() -> Iterator[Receiver]:
    """The receiver on a loop of its own thread (for tests that call the API synchronously)."""
    box, ready = Receiver(url=""), threading.Event()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def serve() -> None:
        async with _serving(box):
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(30), "the receiver did not start"
    try:
        yield box
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


async def send(kind: str, params: dict[str, Any], alert: dict[str, Any] | None = None, **kw: Any) -> None:
    validate(kind, params)
    await plugins()[kind](LOOPBACK, **kw).send(alert or ALERT, params, 5)


def test_every_channel_is_a_registered_plugin() -> None:
    assert {"WEBHOOK", "EMAIL", "SLACK", "TEAMS", "DINGTALK", "WECOM", "FEISHU", "TELEGRAM", "PAGERDUTY",
            "SCRIPT"} <= set(plugins())  # fmt: skip


async def test_slack_incoming_webhook_and_bot_token(receiver: Receiver) -> None:
    receiver.answers["/services/T1/B2/x"] = (200, "ok")
    await send("SLACK", {"webHook": f"{receiver.url}/services/T1/B2/x", "username": "porpoise"})
    method, path, headers, body = receiver.seen[-1]
    assert method == "POST" and path == "/services/T1/B2/x" and headers["Content-Type"].startswith("application/json")
    assert body["username"] == "porpoise" and body["text"].startswith("start process failed\n")
    assert body["blocks"][0] == {"type": "header", "text": {"type": "plain_text", "text": "start process failed"}}
    assert ALERT["link"] in body["blocks"][1]["text"]["text"]

    await send("SLACK", {"botToken": "xoxb-1-2-secret", "channel": "#oncall", "apiUrl": f"{receiver.url}/api"})
    method, path, headers, body = receiver.seen[-1]
    assert path == "/api/chat.postMessage" and headers["Authorization"] == "Bearer xoxb-1-2-secret"
    assert body["channel"] == "#oncall"
    receiver.answers["/api/chat.postMessage"] = (200, {"ok": False, "error": "channel_not_found"})
    with pytest.raises(SendError, match="channel_not_found"):
        await send("SLACK", {"botToken": "xoxb-1", "channel": "#gone", "apiUrl": f"{receiver.url}/api"})
    with pytest.raises(ParamError):
        validate("SLACK", {"username": "x"})


async def test_teams_message_card(receiver: Receiver) -> None:
    await send("TEAMS", {"webHook": f"{receiver.url}/webhookb2/abc"})
    _, path, _, card = receiver.seen[-1]
    assert path == "/webhookb2/abc" and card["@type"] == "MessageCard" and card["title"] == ALERT["title"]
    assert card["themeColor"] == "D70000" and card["text"] == ALERT["content"]
    assert card["potentialAction"][0]["targets"][0]["uri"] == ALERT["link"]


def _dingtalk_sign_ok(path_qs: str, secret: str) -> bool:
    query = parse_qs(urlsplit(path_qs).query)
    timestamp, sign = query["timestamp"][0], query["sign"][0]
    expected = hmac.new(secret.encode(), f"{timestamp}\n{secret}".encode(), hashlib.sha256).digest()
    return base64.b64decode(sign) == expected


async def test_dingtalk_text_markdown_signature_and_errcode(receiver: Receiver) -> None:
    url = f"{receiver.url}/robot/send?access_token=tok123"
    await send("DINGTALK", {"WebHook": url, "Keyword": "porpoise", "AtMobiles": "138001,138002"})
    _, path, _, body = receiver.seen[-1]
    assert "sign=" not in path and body["msgtype"] == "text"
    assert body["text"]["content"].startswith("start process failed\n") and body["text"]["content"].endswith(
        " porpoise"
    )
    assert body["at"] == {"atMobiles": ["138001", "138002"], "atUserIds": [], "isAtAll": False}

    await send("DINGTALK", {"WebHook": url, "Secret": "SECabc", "MsgType": "markdown", "AtUserIds": "u1"})
    _, path, _, body = receiver.seen[-1]
    assert path.startswith("/robot/send?access_token=tok123&timestamp=") and _dingtalk_sign_ok(path, "SECabc")
    assert not _dingtalk_sign_ok(path, "SECother")
    assert body["msgtype"] == "markdown" and body["markdown"]["title"] == ALERT["title"]
    assert body["markdown"]["text"].endswith(" @u1")
    # the signature is over "<timestamp>\n<secret>", base64 of the HMAC, URL-encoded
    signed = dingtalk_signed("http://h/x", "s", 1700000000000)
    digest = hmac.new(b"s", b"1700000000000\ns", hashlib.sha256).digest()
    assert unquote_plus(signed.split("&sign=")[1]) == base64.b64encode(digest).decode()

    receiver.answers["/robot/send"] = (200, {"errcode": 310000, "errmsg": "sign not match"})
    with pytest.raises(SendError, match="sign not match"):
        await send("DINGTALK", {"WebHook": url, "Secret": "wrong"})


async def test_feishu_signed_when_a_secret_is_set(receiver: Receiver) -> None:
    url = f"{receiver.url}/open-apis/bot/v2/hook/xyz"
    await send("FEISHU", {"WebHook": url})
    body = receiver.seen[-1][3]
    assert body == {"msg_type": "text", "content": {"text": f"{ALERT['title']}\n{ALERT['content']}\n{ALERT['link']}"}}
    await send("FEISHU", {"WebHook": url, "Secret": "feishu-secret"})
    body = receiver.seen[-1][3]
    key = f"{body['timestamp']}\nfeishu-secret".encode()
    assert base64.b64decode(body["sign"]) == hmac.new(key, b"", hashlib.sha256).digest()
    receiver.answers["/open-apis/bot/v2/hook/xyz"] = (200, {"code": 19021, "msg": "sign match fail"})
    with pytest.raises(SendError, match="sign match fail"):
        await send("FEISHU", {"WebHook": url, "Secret": "x"})


async def test_wecom_app_message_with_token_and_robot(receiver: Receiver) -> None:
    receiver.answers["/cgi-bin/gettoken"] = (200, {"errcode": 0, "access_token": "ACCESS-1"})
    params = {"corpId": "ww1", "secret": "corp-secret", "agentId": "1000002", "users": "zhangsan,lisi",
              "apiUrl": receiver.url}  # fmt: skip
    await send("WECOM", params)
    (m1, p1, _, b1), (m2, p2, _, b2) = receiver.seen[-2:]
    assert m1 == "GET" and p1 == "/cgi-bin/gettoken?corpid=ww1&corpsecret=corp-secret" and b1 is None
    assert m2 == "POST" and p2 == "/cgi-bin/message/send?access_token=ACCESS-1"
    assert b2["touser"] == "zhangsan|lisi" and b2["agentid"] == 1000002 and b2["msgtype"] == "markdown"
    assert b2["markdown"]["content"].startswith(f"**{ALERT['title']}**\n>")
    await send("WECOM", {**params, "chatId": "CHAT9", "showType": "text"})
    _, path, _, body = receiver.seen[-1]
    assert path == "/cgi-bin/appchat/send?access_token=ACCESS-1" and body["chatid"] == "CHAT9"
    assert body["msgtype"] == "text"
    await send("WECOM", {"sendType": "ROBOT", "webHook": f"{receiver.url}/cgi-bin/webhook/send?key=K"})
    assert receiver.seen[-1][1] == "/cgi-bin/webhook/send?key=K"
    receiver.answers["/cgi-bin/gettoken"] = (200, {"errcode": 40013, "errmsg": "invalid corpid"})
    with pytest.raises(SendError, match="invalid corpid"):
        await send("WECOM", params)


async def test_telegram_send_message(receiver: Receiver) -> None:
    await send("TELEGRAM", {"botToken": "123:ABC", "chatId": "-100200", "parseMode": "Html",
                            "apiUrl": receiver.url})  # fmt: skip
    _, path, _, body = receiver.seen[-1]
    assert path == "/bot123:ABC/sendMessage" and body["chat_id"] == "-100200" and body["parse_mode"] == "HTML"
    await send("TELEGRAM", {"botToken": "9:Z", "chatId": 5, "webHook": f"{receiver.url}/custom/{{botToken}}/send"})
    _, path, _, body = receiver.seen[-1]
    assert path == "/custom/9:Z/send" and "parse_mode" not in body
    receiver.answers["/bot1:X/sendMessage"] = (400, {"ok": False, "description": "Bad Request: chat not found"})
    with pytest.raises(SendError, match="chat not found"):
        await send("TELEGRAM", {"botToken": "1:X", "chatId": "1", "apiUrl": receiver.url})


async def test_pagerduty_triggers_then_resolves_the_instance_s_incident(receiver: Receiver) -> None:
    receiver.answers["/v2/enqueue"] = (202, {"status": "success", "message": "Event processed"})
    params = {"IntegrationKey": "R0UTINGKEY", "apiUrl": receiver.url}
    await send("PAGERDUTY", params)
    trigger = receiver.seen[-1][3]
    assert trigger["routing_key"] == "R0UTINGKEY" and trigger["event_action"] == "trigger"
    assert trigger["dedup_key"] == "porpoise-instance-9001" and trigger["payload"]["severity"] == "critical"
    assert trigger["payload"]["summary"] == ALERT["title"] and trigger["payload"]["source"] == "porpoise"
    assert trigger["links"] == [{"href": ALERT["link"], "text": "Open in Porpoise"}]
    await send("PAGERDUTY", params, {**ALERT, "alert_type_name": "PROCESS_INSTANCE_SUCCESS", "title": "ok now"})
    resolve = receiver.seen[-1][3]
    assert resolve == {"routing_key": "R0UTINGKEY", "event_action": "resolve", "dedup_key": "porpoise-instance-9001"}
    receiver.answers["/v2/enqueue"] = (400, {"status": "invalid event", "errors": ["routing_key is invalid"]})
    with pytest.raises(SendError, match="routing_key is invalid"):
        await send("PAGERDUTY", params)


async def test_a_receiver_that_is_down_slow_or_answers_garbage_fails_with_the_reason(receiver: Receiver) -> None:
    receiver.answers["/garbage"] = (200, "<html>proxy error</html>")
    with pytest.raises(SendError, match="proxy error"):
        await send("FEISHU", {"WebHook": f"{receiver.url}/garbage"})
    with pytest.raises(SendError, match="unreachable"):
        await send("TEAMS", {"webHook": f"http://127.0.0.1:{free_port()}/down"})
    receiver.stall["/slow"] = 30
    with pytest.raises(SendError, match="unreachable: TimeoutError"):
        validate("TEAMS", {"webHook": f"{receiver.url}/slow"})
        await plugins()["TEAMS"](LOOPBACK).send(ALERT, {"webHook": f"{receiver.url}/slow"}, 0.5)
    # the address policy holds for every channel: loopback is refused by default
    with pytest.raises(SendError, match="refused"):
        await plugins()["SLACK"]().send(ALERT, {"webHook": f"{receiver.url}/services/x"}, 5)


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "notify.sh"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


async def test_script_gets_the_alert_as_json_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    _script(tmp_path, f'cat > {out}; echo "$1" > {out}.arg; env > {out}.env')
    await send("SCRIPT", {"path": "notify.sh", "userParams": "--team data"}, script_dir=str(tmp_path))
    assert json.loads(out.read_text())["title"] == ALERT["title"]
    assert (tmp_path / "got.json.arg").read_text() == "--team data\n"
    assert not any(k.startswith("PORPOISE") for k in (tmp_path / "got.json.env").read_text().split())
    _script(tmp_path, "echo 'no such channel' >&2; exit 4")
    with pytest.raises(SendError, match="exited with 4: no such channel"):
        await send("SCRIPT", {"path": "notify.sh"}, script_dir=str(tmp_path))
    with pytest.raises(SendError, match="off on this API server"):
        await send("SCRIPT", {"path": "notify.sh"})
    with pytest.raises(ParamError):
        validate("SCRIPT", {"path": "../../bin/sh"})
    _script(tmp_path, "sleep 30")
    with pytest.raises(SendError, match="did not finish"):
        await plugins()["SCRIPT"](LOOPBACK, str(tmp_path)).send(ALERT, {"path": "notify.sh"}, 0.5)


@pytest.mark.slow
def test_edit_a_group_keep_its_secrets_and_send_a_test_alert(
    api_cluster: ApiCluster, threaded_receiver: Receiver
) -> None:
    c, receiver = api_cluster.client(), threaded_receiver
    receiver.answers["/services/T/B/ok"] = (200, "ok")
    name = f"chat_{uuid.uuid4().hex[:8]}"
    made = c.post("/api/v1/alert-groups", {"name": name, "senders": [
        {"type": "SLACK", "name": "slack", "params": {"webHook": f"{receiver.url}/services/T/B/ok"}},
        {"type": "DINGTALK", "name": "ding", "params": {"WebHook": f"{receiver.url}/robot", "Secret": "SECding"}},
    ]})  # fmt: skip
    shown = c.get(f"/api/v1/alert-groups/{made['id']}")
    assert [s["params"].get("webHook", s["params"].get("WebHook")) for s in shown["senders"]] == ["***", "***"]
    assert "SECding" not in json.dumps(shown) and "services/T/B" not in json.dumps(shown)

    # edit: rename, keep the Slack sender with its masked URL, drop DingTalk, add Teams
    slack = shown["senders"][0]
    edited = c.patch(f"/api/v1/alert-groups/{made['id']}", {"name": f"{name}_2", "senders": [
        {"id": slack["id"], "type": "SLACK", "name": "slack", "params": {**slack["params"], "username": "pp"}},
        {"type": "TEAMS", "name": "teams", "params": {"webHook": f"{receiver.url}/teams"}},
    ]})  # fmt: skip
    assert edited["name"] == f"{name}_2" and [s["name"] for s in edited["senders"]] == ["slack", "teams"]
    assert edited["senders"][0]["id"] == slack["id"]

    tested = c.post(f"/api/v1/alert-groups/{made['id']}/test")
    assert [(s["name"], s["sent"]) for s in tested["senders"]] == [("slack", True), ("teams", True)], tested
    slack_call = next(s for s in receiver.seen if s[1] == "/services/T/B/ok")
    assert slack_call[3]["username"] == "pp" and "test alert" in slack_call[3]["text"]

    receiver.answers["/teams"] = (500, {"error": "teams is down"})
    tested = c.post(f"/api/v1/alert-groups/{made['id']}/test")
    teams = next(s for s in tested["senders"] if s["name"] == "teams")
    assert teams["sent"] is False and "HTTP 500" in teams["error"] and "teams is down" in teams["error"]

    err = error_of(lambda: c.patch(f"/api/v1/alert-groups/{made['id']}", {"senders": [
        {"id": 987654321, "type": "TEAMS", "name": "t", "params": {"webHook": f"{receiver.url}/t"}}]}))  # fmt: skip
    assert err.status == 400 and err.field == "senders[0].id"
    err = error_of(lambda: c.post("/api/v1/alert-groups", {"name": f"s_{uuid.uuid4().hex[:6]}", "senders": [
        {"type": "SCRIPT", "name": "s", "params": {"path": "notify.sh"}}]}))  # fmt: skip
    assert err.status == 400 and "alert_script_dir" in str(err)
    assert error_of(lambda: c.post("/api/v1/alert-groups/987654321/test")).status == 404

    # the same through the CLI: test (exit 1 while teams fails), list, show, the history, delete
    group = str(made["id"])
    run = porpoise(api_cluster, "alert-group", "test", group)
    assert run.returncode == 1 and "slack (SLACK): sent" in run.stdout and "teams (TEAMS): FAILED" in run.stdout
    receiver.answers["/teams"] = (200, {"ok": True})
    assert porpoise(api_cluster, "alert-group", "test", group).returncode == 0
    assert f"{name}_2" in porpoise(api_cluster, "alert-group", "list").stdout
    shown_cli = porpoise(api_cluster, "alert-group", "show", group)
    assert (
        "slack (SLACK)" in shown_cli.stdout
        and "SECding" not in shown_cli.stdout
        and "/services/" not in shown_cli.stdout
    )
    history = porpoise(api_cluster, "alert-group", "alerts", "--json")
    assert history.returncode == 0 and "items" in json.loads(history.stdout)
    bad = porpoise(api_cluster, "alert-group", "show", "x")
    assert bad.returncode == 1 and "must be a number" in bad.stderr and "Traceback" not in bad.stderr
    assert porpoise(api_cluster, "alert-group", "delete", group).returncode == 0
    assert error_of(lambda: c.get(f"/api/v1/alert-groups/{group}")).status == 404


def test_every_sender_describes_its_params_and_marks_its_secrets() -> None:
    for name, cls in plugins().items():
        props = cls.params_schema["properties"]
        assert props, f"{name} has no params schema"
        assert all(p.get("description") for p in props.values()), f"{name}: a param without a description"
        marked = {k for k, p in props.items() if p.get("writeOnly") or p.get("format") == "password"}
        assert marked == set(cls.secret), f"{name}: the secrets marked in the schema are not its secret list"
        assert set(cls.secret) <= SECRET_KEYS, f"{name}: a secret the API would show back"
        assert set(cls.params_schema.get("required", [])) <= set(props)


@pytest.mark.slow
def test_alert_types_list_every_channel_with_its_schema(api_cluster: ApiCluster) -> None:
    types = {t["type"]: t for t in api_cluster.client().get("/api/v1/alert-types")["items"]}
    assert set(types) == set(plugins())
    slack = types["SLACK"]
    assert slack["params"]["properties"]["webHook"]["writeOnly"] is True and "webHook" in slack["secret"]
    assert slack["summary"].startswith("Slack")
    assert types["EMAIL"]["params"]["required"] == ["host", "sender", "receivers"]
    assert types["EMAIL"]["secret"] == ["password"]
    assert error_of(lambda: api_cluster.client("not-a-token").get("/api/v1/alert-types")).status == 401


@pytest.mark.slow
def test_resend_a_finished_alert_to_every_sender(api_cluster: ApiCluster, threaded_receiver: Receiver) -> None:
    c, receiver = api_cluster.client(), threaded_receiver
    receiver.answers["/services/R/S/ok"] = (200, "ok")
    group = c.post("/api/v1/alert-groups", {"name": f"resend_{uuid.uuid4().hex[:8]}", "senders": [
        {"type": "SLACK", "name": "slack", "params": {"webHook": f"{receiver.url}/services/R/S/ok"}}]})  # fmt: skip
    project = f"alerts{uuid.uuid4().hex[:8]}"
    code = c.post("/api/v1/projects", {"name": project})["code"]
    writer, reader, stranger = (f"{k}{uuid.uuid4().hex[:6]}" for k in ("w", "r", "s"))
    as_writer, as_reader, as_stranger = (make_user(api_cluster, n) for n in (writer, reader, stranger))
    c.put(f"/api/v1/projects/{project}/grants/{writer}", {"perms": ["WRITE"]})
    c.put(f"/api/v1/projects/{project}/grants/{reader}", {"perms": ["READ"]})
    title = f"resent {uuid.uuid4().hex[:8]}"
    failed = json.dumps({"delivered": [], "errors": {"slack": "slack refused the message: HTTP 500"}})
    (alert,) = api_cluster.query(
        "INSERT INTO alert (title, content, alert_status, alert_type, log, alert_group_id, project_code, attempts)"
        " VALUES ($1, 'c', 2, 0, $2, $3, $4, 3) RETURNING id",
        title, failed, group["id"], code,
    )  # fmt: skip
    alert_id = alert["id"]

    assert error_of(lambda: as_stranger.post(f"/api/v1/alerts/{alert_id}/resend")).status == 404
    assert error_of(lambda: as_reader.post(f"/api/v1/alerts/{alert_id}/resend")).status == 403
    assert error_of(lambda: c.post("/api/v1/alerts/987654321/resend")).status == 404
    assert as_writer.post(f"/api/v1/alerts/{alert_id}/resend") == {"id": alert_id, "status": "WAIT_EXECUTION"}

    def delivered() -> Any:
        row = next(a for a in c.get("/api/v1/alerts", size=100)["items"] if a["id"] == alert_id)
        return row if row["status"] == "EXECUTION_SUCCESS" else None

    done = wait_sync(delivered, 30, "the resent alert delivered")
    assert done["attempts"] == 1 and json.loads(done["log"]) == {"delivered": [group["senders"][0]["id"]],
                                                                 "errors": {}}  # fmt: skip
    assert any(s[3] and title in s[3]["text"] for s in receiver.seen if s[1] == "/services/R/S/ok")

    # an alert still waiting for its delivery is not resent
    (waiting,) = api_cluster.query(
        "INSERT INTO alert (title, content, alert_status, alert_type, project_code, next_attempt_time)"
        " VALUES ('w', 'c', 0, 0, $1, now() + interval '1 day') RETURNING id",
        code,
    )
    err = error_of(lambda: c.post(f"/api/v1/alerts/{waiting['id']}/resend"))
    assert err.status == 409 and "WAIT_EXECUTION" in str(err)
