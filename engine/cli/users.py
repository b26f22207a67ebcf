"""``porpoise user`` and ``porpoise token``: users and API tokens, through the API (admins manage users;
everyone their own password and tokens), and the first admin of a fresh install straight into the database.

    porpoise user create NAME [--admin] [--password-stdin]     (admins) a user; the password is prompted
    porpoise user create NAME --admin --dsn DSN [--token]      the first admin, directly in the database
    porpoise user list | disable NAME | enable NAME | delete NAME
    porpoise user passwd [NAME]                                your password (or, admins, NAME's)
    porpoise token create NAME [--days N] [--perms READ,EXECUTE] [--user U]
    porpoise token list [--user U] | revoke ID
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import getpass
import json
import sys
from typing import Any

from core.errors import PorpoiseError
from engine.client import ApiClient, ApiClientError, connection_parser, discover


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    conn = connection_parser(common)
    stdin = "read the password(s) from standard input, one a line, instead of prompting"

    user = sub.add_parser("user", help="users (admins), your password").add_subparsers(dest="action", required=True)
    p = user.add_parser("create", parents=[conn], help="create a user")
    p.add_argument("name")
    p.add_argument("--admin", action="store_true", help="an admin (default: a general user)")
    p.add_argument("--email")
    p.add_argument("--password-stdin", action="store_true", help=stdin)
    p.add_argument("--dsn", help="write straight into this database (the first admin of a fresh install)")
    p.add_argument("--print-token", action="store_true", help="with --dsn: also create and print an API token")
    user.add_parser("list", parents=[conn], help="users and their state")
    simple = {
        "disable": "disable a user (its tokens and sessions stop working)",
        "enable": "enable a disabled user",
        "delete": "delete a user owning no project",
    }
    for action, text in simple.items():
        user.add_parser(action, parents=[conn], help=text).add_argument("name")
    p = user.add_parser("passwd", parents=[conn], help="change your password (admins: NAME's)")
    p.add_argument("name", nargs="?")
    p.add_argument("--password-stdin", action="store_true", help=stdin)

    token = sub.add_parser("token", help="API tokens").add_subparsers(dest="action", required=True)
    p = token.add_parser("create", parents=[conn], help="create a token (shown once)")
    p.add_argument("name")
    p.add_argument("--days", type=int, help="days until it expires (default 90, at most 365)")
    p.add_argument("--perms", help="limit it to these project rights, e.g. READ or READ,EXECUTE")
    p.add_argument("--user", help="whose token (admins; default: yours)")
    p = token.add_parser("list", parents=[conn], help="tokens (without the secrets)")
    p.add_argument("--user", help="whose tokens (admins; default: yours)")
    token.add_parser("revoke", parents=[conn], help="revoke a token").add_argument("id", type=int)


def _password(args: argparse.Namespace, prompt: str, confirm: bool = True) -> str:
    if args.password_stdin:
        line = sys.stdin.readline()
        if not line:
            raise ApiClientError("no password on standard input")
        return line.rstrip("\n")
    first = getpass.getpass(f"{prompt}: ")
    if confirm and getpass.getpass(f"{prompt} again: ") != first:
        raise ApiClientError("the passwords differ")
    return first


def _show(data: Any, args: argparse.Namespace, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else text)


def run(args: argparse.Namespace) -> int:
    if args.command == "user" and args.action == "create" and args.dsn:
        return _create_in_database(args)
    client = ApiClient(discover(args.api, args.token, getattr(args, "ca_file", None)))
    return (_user if args.command == "user" else _token)(client, args)


def _user(client: ApiClient, args: argparse.Namespace) -> int:
    if args.action == "create":
        body = {"name": args.name, "password": _password(args, "password"), "admin": args.admin}
        if args.email:
            body["email"] = args.email
        user = client.post("/api/v1/users", body)
        _show(user, args, f"created {'admin' if user['admin'] else 'user'} {user['name']}")
    elif args.action == "list":
        users = client.get("/api/v1/users", size=500)["items"]
        lines = [
            f"{u['name']:<24} {'admin' if u['admin'] else 'general':<8} {'enabled' if u['enabled'] else 'DISABLED'}"
            for u in users
        ]
        _show(users, args, "\n".join(lines) or "no users")
    elif args.action in ("disable", "enable"):
        user = client.put(f"/api/v1/users/{args.name}", {"enabled": args.action == "enable"})
        _show(user, args, f"{args.action}d {user['name']}")
    elif args.action == "delete":
        _show(client.delete(f"/api/v1/users/{args.name}"), args, f"deleted {args.name}")
    elif args.action == "passwd":
        if args.name:
            client.put(f"/api/v1/users/{args.name}", {"password": _password(args, f"new password of {args.name}")})
        else:
            old = _password(args, "current password", confirm=False)
            client.post("/api/v1/me/password", {"old_password": old, "new_password": _password(args, "new password")})
        _show({"changed": True}, args, "password changed")
    return 0


def _token(client: ApiClient, args: argparse.Namespace) -> int:
    if args.action == "create":
        body: dict[str, Any] = {"name": args.name}
        if args.days is not None:
            body["expires_in_days"] = args.days
        if args.perms:
            body["perms"] = [p.strip().upper() for p in args.perms.split(",") if p.strip()]
        if args.user:
            body["user"] = args.user
        token = client.post("/api/v1/tokens", body)
        _show(token, args, f"{token['token']}\n(token {token['id']} of {token['user']}, expires {token['expire_time']};"
                           " this is the only time it is shown)")  # fmt: skip
    elif args.action == "list":
        items = client.get("/api/v1/tokens", user=args.user, size=500)["items"]
        lines = [f"{t['id']:>6}  {t['name']:<24} {t['user']:<16} expires {t['expire_time'] or 'never'}"
                 f"  {','.join(t['perms']) if t['perms'] else 'all rights'}" for t in items]  # fmt: skip
        _show(items, args, "\n".join(lines) or "no tokens")
    elif args.action == "revoke":
        _show(client.delete(f"/api/v1/tokens/{args.id}"), args, f"revoked token {args.id}")
    return 0


def _create_in_database(args: argparse.Namespace) -> int:
    """The first admin of a fresh install (or a user while the API is down): straight into the database."""
    import asyncpg

    from engine.accounts.tokens import DEFAULT_DAYS, create_token
    from engine.api.routing import ApiError
    from engine.api.users import create_user
    from engine.storage.schema import check_schema

    password = _password(args, "password")

    async def create() -> str | None:
        try:
            conn = await asyncpg.connect(args.dsn, timeout=30)
        except (OSError, asyncpg.PostgresError) as exc:
            raise PorpoiseError(f"database: {exc}") from exc
        try:
            await check_schema(conn)  # `porpoise db init` made it; this command runs no DDL
            async with conn.transaction():
                user_id = await create_user(conn, args.name, password, args.admin, args.email)
                if not args.print_token:
                    return None
                expires = dt.datetime.now(dt.UTC) + dt.timedelta(days=DEFAULT_DAYS)
                return (await create_token(conn, user_id, "cli", expires))[1]
        except ApiError as exc:
            raise PorpoiseError(f"{exc.field}: {exc.message}" if exc.field else exc.message) from None
        except (OSError, asyncpg.PostgresError) as exc:
            raise PorpoiseError(f"database: {exc}") from exc
        finally:
            await conn.close()

    token = asyncio.run(create())
    print(f"created {'admin' if args.admin else 'user'} {args.name}")
    if token:
        print(token)
    return 0
