"""LDAP sign-in: checks a user's password against a directory and reads their e-mail and groups.

Two ways to find the user, as DolphinScheduler and most LDAP integrations offer: bind as the user directly
(``ldap.user_dn_template``), or search under ``ldap.base_dn`` with ``ldap.user_filter`` (as ``ldap.bind_dn``
or anonymously), then bind as the entry found. Connections use StartTLS (``ldap.start_tls``) or LDAPS URLs
with the configured CA; every operation has ``ldap.timeout``. The login name is escaped before it enters a
DN or a filter, and an empty password is refused here (an LDAP "unauthenticated bind" would succeed).

ldap3 is a blocking client: each sign-in runs in a worker thread, never on the event loop.
:class:`DirectoryUnavailable` means no server could be reached or the service account was refused (the
API answers 503 and local users still sign in); ``None`` from :meth:`Directory.authenticate` means wrong
credentials or no such user.
"""

from __future__ import annotations

import asyncio
import math
import ssl
from dataclasses import dataclass
from pathlib import Path

import ldap3
from ldap3.core import exceptions as ldap_errors
from ldap3.utils.conv import escape_filter_chars
from ldap3.utils.dn import escape_rdn

from core.errors import PorpoiseError
from engine.config import LdapConfig


class DirectoryUnavailable(PorpoiseError):
    """No directory server answered, or it refused the service account: nobody can be checked now."""


@dataclass(frozen=True)
class DirectoryUser:
    dn: str
    email: str | None
    groups: frozenset[str]


class Directory:
    def __init__(self, cfg: LdapConfig) -> None:
        self.cfg = cfg
        tls = None
        if cfg.start_tls or any(u.startswith("ldaps://") for u in cfg.urls):
            tls = ldap3.Tls(
                validate=ssl.CERT_REQUIRED, ca_certs_file=cfg.ca_file or None, version=ssl.PROTOCOL_TLS_CLIENT
            )
        servers = [ldap3.Server(url, use_ssl=url.startswith("ldaps://"), tls=tls, connect_timeout=cfg.timeout)
                   for url in cfg.urls]  # fmt: skip
        self.pool = ldap3.ServerPool(servers, ldap3.FIRST, active=1, exhaust=True)

    async def authenticate(self, user: str, password: str) -> DirectoryUser | None:
        if not password or not user:
            return None
        return await asyncio.to_thread(self._authenticate, user, password)

    # -- blocking, in a thread ----------------------------------------------------------------------------------

    def _connection(self, dn: str | None, password: str | None) -> ldap3.Connection:
        """A bound connection; LDAPBindError for wrong credentials, DirectoryUnavailable when unreachable."""
        conn = ldap3.Connection(
            # ldap3 sets SO_RCVTIMEO from whole seconds
            self.pool, user=dn, password=password, receive_timeout=max(1, math.ceil(self.cfg.timeout)),
            raise_exceptions=True, auto_bind=ldap3.AUTO_BIND_NONE, read_only=True,
        )  # fmt: skip
        try:
            conn.open()
            if self.cfg.start_tls:
                conn.start_tls()
            conn.bind()
            return conn
        except ldap_errors.LDAPBindError:
            conn.unbind()
            raise
        except ldap_errors.LDAPInvalidCredentialsResult as exc:
            conn.unbind()
            raise ldap_errors.LDAPBindError(str(exc)) from None
        except (ldap_errors.LDAPException, OSError) as exc:
            _close(conn)
            raise DirectoryUnavailable(f"LDAP directory unavailable: {type(exc).__name__}: {exc}") from None

    def _service_password(self) -> str | None:
        if self.cfg.bind_password_file:
            return Path(self.cfg.bind_password_file).read_text(encoding="utf-8").strip()
        return self.cfg.bind_password or None

    def _find(self, user: str) -> tuple[str, str | None] | None:
        """The user's DN and e-mail: by search (service account) or from the DN template."""
        cfg = self.cfg
        if cfg.user_dn_template:
            return cfg.user_dn_template.replace("{user}", escape_rdn(user)), None
        try:
            conn = self._connection(cfg.bind_dn or None, self._service_password() if cfg.bind_dn else None)
        except ldap_errors.LDAPBindError as exc:
            raise DirectoryUnavailable(f"LDAP service account refused: {exc}") from None
        try:
            conn.search(
                cfg.base_dn, cfg.user_filter.replace("{user}", escape_filter_chars(user)), ldap3.SUBTREE,
                attributes=[cfg.email_attribute], size_limit=2,
            )  # fmt: skip
            entries = list(conn.entries)
        except ldap_errors.LDAPException as exc:
            raise DirectoryUnavailable(f"LDAP search failed: {type(exc).__name__}: {exc}") from None
        finally:
            conn.unbind()
        if len(entries) != 1:
            return None  # no such user, or a filter matching several entries: refuse rather than guess
        entry = entries[0]
        return entry.entry_dn, _first(entry, cfg.email_attribute)

    def _authenticate(self, user: str, password: str) -> DirectoryUser | None:
        found = self._find(user)
        if found is None:
            return None
        dn, email = found
        try:
            conn = self._connection(dn, password)
        except ldap_errors.LDAPBindError:
            return None
        try:
            cfg = self.cfg
            if email is None and cfg.email_attribute:
                conn.search(dn, "(objectClass=*)", ldap3.BASE, attributes=[cfg.email_attribute])
                email = _first(conn.entries[0], cfg.email_attribute) if conn.entries else None
            group_filter = cfg.group_filter.replace("{dn}", escape_filter_chars(dn)).replace(
                "{user}", escape_filter_chars(user)
            )
            conn.search(
                cfg.group_base_dn or cfg.base_dn or _parent(dn), group_filter, ldap3.SUBTREE,
                attributes=[cfg.group_name_attribute],
            )  # fmt: skip
            groups = frozenset(g for e in conn.entries if (g := _first(e, cfg.group_name_attribute)))
        except ldap_errors.LDAPException as exc:
            raise DirectoryUnavailable(f"LDAP search failed: {type(exc).__name__}: {exc}") from None
        finally:
            conn.unbind()
        return DirectoryUser(dn, email, groups)


def _close(conn: ldap3.Connection) -> None:
    """Close a connection that failed half-way (its socket may be open, TLS or not)."""
    try:
        conn.unbind()
    except (ldap_errors.LDAPException, OSError):
        sock = getattr(conn, "socket", None)
        if sock is not None:
            sock.close()


def _first(entry: ldap3.abstract.entry.Entry, attribute: str) -> str | None:
    if attribute not in entry.entry_attributes:
        return None
    values = entry[attribute].values
    return str(values[0]) if values else None


def _parent(dn: str) -> str:
    return dn.split(",", 1)[1] if "," in dn else dn


def grants_of(cfg: LdapConfig, groups: frozenset[str]) -> dict[str, set[str]]:
    """Project -> permission names the user's groups give (``ldap.project_grants``)."""
    out: dict[str, set[str]] = {}
    for item in cfg.project_grants:
        group, _, grant = item.partition("=")
        project, _, perms = grant.partition(":")
        if group in groups:
            out.setdefault(project, set()).update(perms.split("+"))
    return out
