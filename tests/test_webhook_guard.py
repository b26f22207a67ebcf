"""Webhook alert targets are checked against the address policy (engine/alerts/netguard.py): on the resolved
addresses, not the name; the connection goes to the checked addresses; no redirects are followed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from core.errors import ConfigError
from engine.alerts.netguard import AddressPolicy
from engine.alerts.senders import SendError, WebhookSender
from engine.config import load

ALERT = {"id": 1, "title": "t", "content": "c", "alert_type_name": "FAILURE"}


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("100.64.0.1", "not globally routable"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("8.8.8.8", ""),
        ("2606:4700:4700::1111", ""),
    ],
)
def test_default_policy_refuses_every_address_that_is_not_public(address: str, refused: str) -> None:
    why = AddressPolicy().refusal(address)
    assert (refused in why) if refused else why == "", why


def test_allow_and_deny_lists() -> None:
    policy = AddressPolicy(allow=["10.20.0.0/16", "127.0.0.1"], deny=["10.20.9.0/24", "8.8.8.8/32"])
    assert policy.refusal("10.20.1.1") == "" and policy.refusal("127.0.0.1") == ""
    assert "denied" in policy.refusal("10.20.9.9")  # deny wins over allow
    assert "denied" in policy.refusal("8.8.8.8")
    assert "private" in policy.refusal("10.21.0.1")
    with pytest.raises(ConfigError, match=r"api\.alert_webhook_allow"):
        load(overrides=["api.alert_webhook_allow=[not-a-net]"], environ={})


@pytest.fixture
async def hook() -> AsyncIterator[tuple[int, list[bytes]]]:
    posts: list[bytes] = []

    async def receive(request: web.Request) -> web.Response:
        posts.append(await request.read())
        return web.json_response({})

    async def redirect(_: web.Request) -> web.Response:
        raise web.HTTPFound("http://169.254.169.254/latest/meta-data/")

    app = web.Application()
    app.router.add_post("/hook", receive)
    app.router.add_post("/redirect", redirect)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield server.port, posts
    finally:
        await server.close()


async def test_a_name_resolving_to_loopback_is_refused_before_any_connection(hook: tuple[int, list[bytes]]) -> None:
    port, posts = hook
    for url in (f"http://localhost:{port}/hook", f"http://127.0.0.1:{port}/hook", f"http://[::1]:{port}/hook"):
        with pytest.raises(SendError, match=r"refused: .* loopback"):
            await WebhookSender().send(ALERT, {"url": url}, timeout=5)
    assert posts == []
    # refused by the policy (the message says why), not a connection attempt that failed
    with pytest.raises(SendError, match=r"169\.254\.169\.254 is link-local"):
        await WebhookSender().send(ALERT, {"url": "http://169.254.169.254/latest/meta-data/"}, timeout=5)


async def test_an_allowed_network_is_delivered_to_and_redirects_are_not_followed(
    hook: tuple[int, list[bytes]],
) -> None:
    port, posts = hook
    sender = WebhookSender(AddressPolicy(allow=["127.0.0.0/8", "::1"]))
    await sender.send(ALERT, {"url": f"http://localhost:{port}/hook"}, timeout=5)
    assert len(posts) == 1 and b'"title": "t"' in posts[0]
    with pytest.raises(SendError, match="HTTP 302"):
        await sender.send(ALERT, {"url": f"http://127.0.0.1:{port}/redirect"}, timeout=5)
