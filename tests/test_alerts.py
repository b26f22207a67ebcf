"""Alerts delivered by the API server's sender service to a real local SMTP server (aiosmtpd) and a real
local webhook server: retries, no duplicates after a partial failure, secrets never shown or logged."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword

from engine.infra.ports import free_port
from tests.conftest import ApiCluster
from tests.helpers import wait_sync
from tests.test_api import error_of, start, wait_final

pytestmark = pytest.mark.slow

SMTP_PASSWORD = "smtp-Pa55word-xyz"
HOOK_TOKEN = "tok-SECRET-4242"


@dataclass
class Mailbox:
    messages: list[Any] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Envelope) -> str:
        self.messages.append(message_from_bytes(envelope.content))  # type: ignore[arg-type]
        return "250 OK"


def _authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
    ok = isinstance(data, LoginPassword) and data.login == b"porpoise" and data.password == SMTP_PASSWORD.encode()
    return AuthResult(success=ok)


@pytest.fixture
def smtp() -> Iterator[tuple[int, Mailbox]]:
    box = Mailbox()
    port = free_port()
    ctl = Controller(box, hostname="127.0.0.1", port=port, authenticator=_authenticate, auth_require_tls=False)
    ctl.start()
    try:
        yield port, box
    finally:
        ctl.stop()


@dataclass
class Hook:
    fail_first: int = 0
    posts: list[tuple[dict[str, str], Any]] = field(default_factory=list)


@pytest.fixture
def webhook() -> Iterator[tuple[str, Hook]]:
    hook = Hook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            hook.posts.append((dict(self.headers), body))
            status = 500 if len(hook.posts) <= hook.fail_first else 200
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", hook
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _group(c: ApiCluster, smtp_port: int, hook_url: str) -> int:
    body = {
        "name": f"oncall_{uuid.uuid4().hex[:8]}",
        "senders": [
            {"type": "WEBHOOK", "name": "chat", "params": {"url": hook_url, "headers": {"X-Token": HOOK_TOKEN}}},
            {"type": "EMAIL", "name": "mail", "params": {"host": "127.0.0.1", "port": smtp_port,
             "sender": "porpoise@example.com", "receivers": ["oncall@example.com"], "user": "porpoise",
             "password": SMTP_PASSWORD}},
        ],
    }  # fmt: skip
    return int(c.client().post("/api/v1/alert-groups", body)["id"])


def _run(c: ApiCluster, script: str, warning_type: str, group: int | None) -> dict[str, Any]:
    doc = {"name": f"alerting_{uuid.uuid4().hex[:8]}", "project": "alert-tests",
           "tasks": [{"name": "job", "type": "SHELL", "params": {"rawScript": script}}]}  # fmt: skip
    code = c.client().post("/api/v1/workflows", doc, release="true")["code"]
    body: dict[str, Any] = {"warning_type": warning_type}
    if group is not None:
        body["warning_group_id"] = group
    return wait_final(c, start(c, code, body))


def _alerts(c: ApiCluster, instance_id: int, done: bool = True) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def ready() -> bool:
        nonlocal found
        found = c.client().get("/api/v1/alerts", instance=instance_id)["items"]
        return bool(found) and (not done or all(a["status"] != "WAIT_EXECUTION" for a in found))

    wait_sync(ready, 30, what=f"alerts of instance {instance_id} handled")
    return found


def test_a_failure_alert_reaches_webhook_and_mail_with_a_retry_and_no_duplicate(
    api_cluster: ApiCluster, smtp: tuple[int, Mailbox], webhook: tuple[str, Hook]
) -> None:
    c, (port, box), (url, hook) = api_cluster, smtp, webhook
    hook.fail_first = 1  # the webhook answers 500 once: the alert is retried, the mail is not sent again
    group = _group(c, port, url)
    detail = _run(c, "exit 3", "ALL", group)
    assert detail["state"] == "FAILURE"
    (alert,) = _alerts(c, detail["id"])
    assert alert["alert_type"] == "PROCESS_INSTANCE_FAILURE" and alert["status"] == "EXECUTION_SUCCESS"
    assert alert["attempts"] == 2 and "job" in alert["content"]
    assert len(hook.posts) == 2 and len(box.messages) == 1
    headers, payload = hook.posts[-1]
    assert headers["X-Token"] == HOOK_TOKEN and payload["workflow_instance_id"] == detail["id"]
    mail = box.messages[0]
    assert mail["To"] == "oncall@example.com" and "failed" in mail["Subject"]
    shown = json.dumps(c.client().get(f"/api/v1/alert-groups/{group}"))
    assert SMTP_PASSWORD not in shown and HOOK_TOKEN not in shown and url not in shown
    stored = json.dumps(
        [r["params"] for r in c.query("SELECT params FROM alert_sender WHERE alert_group_id = $1", group)]
    )
    assert SMTP_PASSWORD not in stored and HOOK_TOKEN not in stored and "pps1:" in stored  # sealed at rest
    log_text = c.api.proc.log_path.read_text()
    assert "alert not delivered" in log_text  # the first webhook attempt was logged ...
    assert SMTP_PASSWORD not in log_text and HOOK_TOKEN not in log_text  # ... without a secret


def test_an_unreachable_sender_ends_partial_after_the_retries(
    api_cluster: ApiCluster, smtp: tuple[int, Mailbox]
) -> None:
    c, (port, box) = api_cluster, smtp
    dead = f"http://127.0.0.1:{free_port()}/nobody?token={HOOK_TOKEN}"
    group = _group(c, port, dead)
    detail = _run(c, "exit 1", "FAILURE", group)
    (alert,) = _alerts(c, detail["id"])
    assert alert["status"] == "EXECUTION_PARTIAL_SUCCESS" and alert["attempts"] == 3
    assert len(box.messages) == 1  # delivered once, not once per attempt
    assert "chat" in alert["log"] and HOOK_TOKEN not in alert["log"]


def test_warning_type_decides_which_ends_alert(api_cluster: ApiCluster, webhook: tuple[str, Hook]) -> None:
    c, (url, hook) = api_cluster, webhook
    group = int(c.client().post("/api/v1/alert-groups", {"name": f"g_{uuid.uuid4().hex[:6]}", "senders": [
        {"type": "WEBHOOK", "name": "chat", "params": {"url": url}}]})["id"])  # fmt: skip
    ok = _run(c, "true", "SUCCESS", group)
    (alert,) = _alerts(c, ok["id"])
    assert alert["alert_type"] == "PROCESS_INSTANCE_SUCCESS" and alert["status"] == "EXECUTION_SUCCESS"
    assert hook.posts[-1][1]["alert_type_name"] == "PROCESS_INSTANCE_SUCCESS"
    quiet = _run(c, "exit 1", "SUCCESS", group)  # a failure with warning type SUCCESS: no alert
    none = _run(c, "true", "NONE", group)
    assert not c.query("SELECT 1 FROM alert WHERE workflow_instance_id = ANY($1)", [quiet["id"], none["id"]])


def test_bad_alert_groups_are_refused(api_cluster: ApiCluster) -> None:
    post = api_cluster.client().post
    cases = [
        ({"type": "WEBHOOK", "name": "x", "params": {"url": "ftp://x"}}, "senders[0].params.url"),
        ({"type": "EMAIL", "name": "x", "params": {"host": "h", "sender": "a@b", "receivers": ["nope"]}},
         "senders[0].params.receivers"),
        ({"type": "PIGEON", "name": "x", "params": {}}, "senders[0].type"),
    ]  # fmt: skip
    for sender, field_name in cases:
        err = error_of(lambda sender=sender: post("/api/v1/alert-groups", {"name": "bad", "senders": [sender]}))
        assert err.status == 400 and err.field == field_name, err
    assert not api_cluster.query("SELECT 1 FROM alert_group WHERE group_name = 'bad'")
