"""Which addresses webhook alert senders may call (against SSRF towards the API server's own network).

Refused unless allowed: every address that is not globally routable (loopback, link-local and the cloud
metadata service 169.254.169.254, private networks, shared address space, unspecified, multicast, reserved;
IPv4-mapped IPv6 forms judged as IPv4), and any network in ``api.alert_webhook_deny``. A network in
``api.alert_webhook_allow`` is allowed unless it is also denied. The check is on the resolved addresses, not
the name: the name is resolved once, every address it gives must pass, and the connection is made to those
very addresses (a pinned resolver, no redirects), so a name that resolves differently the second time
(DNS rebinding) cannot slip through.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult

from core.errors import PorpoiseError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class AddressRefused(PorpoiseError):
    """The target resolves to an address the policy refuses; the message says which and why."""


def networks(items: Sequence[str]) -> list[Network]:
    """Parse CIDRs (a bare address is a /32 or /128); ValueError naming the bad one."""
    out = []
    for item in items:
        try:
            out.append(ipaddress.ip_network(item.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{item!r} is not an IP network (CIDR)") from None
    return out


def _kind(ip: Address) -> str:
    for attr, name in (
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local (cloud metadata lives here)"),
        ("is_unspecified", "unspecified"),
        ("is_multicast", "multicast"),
        ("is_private", "private"),
        ("is_reserved", "reserved"),
    ):
        if getattr(ip, attr):
            return name
    return "not globally routable"


class AddressPolicy:
    def __init__(self, allow: Sequence[str] = (), deny: Sequence[str] = ()) -> None:
        self.allow = networks(allow)
        self.deny = networks(deny)

    def refusal(self, address: str) -> str:
        """Why ``address`` may not be called ("" when it may)."""
        ip: Address = ipaddress.ip_address(address.split("%", 1)[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip in net for net in self.deny):
            return f"{ip} is denied (api.alert_webhook_deny)"
        if any(ip in net for net in self.allow):
            return ""
        special = ip.is_multicast or ip.is_reserved or ip.is_loopback or ip.is_link_local or ip.is_unspecified
        if special or not ip.is_global:
            return f"{ip} is {_kind(ip)}; allow it with api.alert_webhook_allow"
        return ""

    async def resolve(self, url: str) -> tuple[str, list[ResolveResult]]:
        """The URL's host and its checked addresses; AddressRefused when any address is refused."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
            literal = True
        except ValueError:
            literal = False
        if literal:
            found = [(socket.AF_INET6 if ":" in host else socket.AF_INET, host)]
        else:
            try:
                infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError as exc:
                raise AddressRefused(f"cannot resolve {host!r}: {exc}") from None
            found = [(int(family), str(sockaddr[0])) for family, _, _, _, sockaddr in infos]
        if not found:
            raise AddressRefused(f"{host!r} resolves to no address")
        for _, address in found:
            why = self.refusal(address)
            if why:
                raise AddressRefused(f"webhook host {host!r} refused: {why}")
        results = [
            ResolveResult(hostname=host, host=a, port=port, family=f, proto=0, flags=socket.AI_NUMERICHOST)
            for f, a in dict.fromkeys(found)
        ]
        return host, results


class PinnedResolver(AbstractResolver):
    """Answers only the host it was made for, with the addresses already checked."""

    def __init__(self, host: str, results: list[ResolveResult]) -> None:
        self.host = host
        self.results = results

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host != self.host:
            raise OSError(f"{host!r} was not checked")
        return [{**r, "port": port or r["port"]} for r in self.results]  # type: ignore[typeddict-item]

    async def close(self) -> None:
        return None
