"""One HTTP call of an alert sender, under the webhook address policy (netguard.py).

The target's name is resolved once, every address must pass the policy, and the connection goes to those
addresses (a pinned resolver); no redirects; one timeout covers resolving, connecting and the answer,
whose body is read up to a bound.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import aiohttp

from core.errors import PorpoiseError
from engine.alerts.netguard import AddressPolicy, AddressRefused, PinnedResolver


class SendError(PorpoiseError):
    """Delivery failed; the message says why (with the receiver's answer, when there was one)."""


#: the most of an answer's body read (enough for any service's verdict and an error text)
MAX_ANSWER_BYTES = 64 * 1024


async def post_json(
    guard: AddressPolicy,
    url: str,
    body: Any,
    timeout: float,
    *,
    headers: Mapping[str, str] | None = None,
    method: str = "POST",
    what: str = "webhook",
) -> tuple[int, bytes]:
    """Send ``body`` as JSON (none for GET) and return the status and the start of the answer's body;
    :class:`SendError` when the address is refused or the call fails."""
    try:
        host, addresses = await asyncio.wait_for(guard.resolve(url), timeout)
    except AddressRefused as exc:
        raise SendError(str(exc)) from None
    except TimeoutError:
        raise SendError(f"{what} unreachable: resolving its host timed out") from None
    sent_headers = {"Content-Type": "application/json; charset=utf-8", **dict(headers or {})}
    data = None if body is None else json.dumps(body, default=str, ensure_ascii=False).encode()
    connector = aiohttp.TCPConnector(resolver=PinnedResolver(host, addresses), use_dns_cache=False)
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout), connector=connector) as session,
            session.request(method, url, data=data, headers=sent_headers, allow_redirects=False) as resp,
        ):
            return resp.status, await resp.content.read(MAX_ANSWER_BYTES)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise SendError(f"{what} unreachable: {type(exc).__name__}: {exc}") from None
