"""``porpoise datasource``: data sources of SQL and PROCEDURE tasks (list, put, test, delete). Talks to the API;
``--json`` prints what it answered. Passwords are read from stdin or an environment variable, never the
command line (where ``ps`` would show them); an edit without one keeps the stored password.

    porpoise datasource put NAME --type MYSQL --host H [--port P] --database D --user U --password-env VAR
                                 [--other key=value ...] [--note TEXT]
    porpoise datasource test NAME [--timeout S]      connect and run SELECT 1: exit 1 with the server's error
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from engine.client import ApiClient, ApiClientError
from engine.tasks.sql_dialects import SOURCE_TYPES

ACTIONS = ["list", "put", "test", "delete"]


def add_parsers(sub: Any, conn: argparse.ArgumentParser) -> None:
    p = sub.add_parser("datasource", parents=[conn], help="data sources of SQL and PROCEDURE tasks")
    p.add_argument("action", choices=ACTIONS)
    p.add_argument("name", nargs="?", help="data source name (put, test, delete)")
    p.add_argument("--type", choices=SOURCE_TYPES, help="put: the server's type (new sources: POSTGRESQL)")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--database")
    p.add_argument("--user")
    p.add_argument("--dsn-env", metavar="VAR", help="put (POSTGRESQL): a full postgresql:// URL from this variable")
    p.add_argument("--password-env", metavar="VAR", help="put: the password from this environment variable")
    p.add_argument("--password-stdin", action="store_true", help="put: the password from the first line of stdin")
    p.add_argument("--other", action="append", default=[], metavar="KEY=VALUE", help="put: a session setting")
    p.add_argument("--note")
    p.add_argument("--timeout", type=int, help="test: seconds to wait for the server (default 15)")


def _name(args: argparse.Namespace) -> str:
    if not args.name:
        raise ApiClientError(f"datasource {args.action}: give the data source's name")
    return str(args.name)


def _secret_from_env(var: str, what: str) -> str:
    value = os.environ.get(var)
    if value is None:
        raise ApiClientError(f"datasource put: {what}: environment variable {var} is not set")
    return value


def put_body(args: argparse.Namespace) -> dict[str, Any]:
    params: dict[str, Any] = {
        k: getattr(args, k) for k in ("host", "port", "database", "user") if getattr(args, k) is not None
    }
    if args.password_env and args.password_stdin:
        raise ApiClientError("datasource put: give --password-env or --password-stdin, not both")
    if args.password_env:
        params["password"] = _secret_from_env(args.password_env, "--password-env")
    elif args.password_stdin:
        params["password"] = sys.stdin.readline().rstrip("\n")
    else:
        params["password"] = "***"  # keep the stored one (an edit); a new source without one is refused
    if args.dsn_env:
        params["dsn"] = _secret_from_env(args.dsn_env, "--dsn-env")
    other: dict[str, str] = {}
    for item in args.other:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ApiClientError(f"datasource put: --other {item!r}: expected KEY=VALUE")
        other[key] = value
    if other:
        params["other"] = other
    body: dict[str, Any] = {"params": params}
    if args.type:
        body["type"] = args.type
    if args.note is not None:
        body["note"] = args.note
    return body


def cmd_datasource(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    if args.action == "list":
        reply = client.get("/api/v1/datasources", size=500)
    elif args.action == "put":
        try:
            reply = client.put(f"/api/v1/datasources/{_name(args)}", put_body(args))
        except ApiClientError as exc:
            if "no stored password" in str(exc):
                raise ApiClientError(f"{exc} (--password-env VAR or --password-stdin)") from None
            raise
    elif args.action == "test":
        body = {"timeout": args.timeout} if args.timeout else {}
        if args.timeout:  # the API answers within the test's timeout (and a few seconds): wait for it
            client.timeout = max(client.timeout, args.timeout + 10)
        reply = client.post(f"/api/v1/datasources/{_name(args)}/test", body)
    else:
        reply = client.delete(f"/api/v1/datasources/{_name(args)}")
    if args.json:
        print(json.dumps(reply))
    elif args.action == "list":
        table = Table("name", "type", "host", "port", "database", "user", "note")
        for d in reply["items"]:
            p = d["params"]
            table.add_row(d["name"], d["type"], str(p.get("host", "-")), str(p.get("port", "-")),
                          str(p.get("database", "-")), str(p.get("user", "-")), d.get("note") or "")  # fmt: skip
        out.print(table)
    elif args.action == "test":
        if reply["ok"]:
            out.print(f"{reply['name']} ({reply['type']}): ok, {reply['version']} ({reply['seconds']}s)")
        else:
            out.print(f"{reply['name']} ({reply['type']}): FAILED: {reply['error']}", markup=False)
    elif args.action == "delete":
        out.print(f"data source {reply['deleted']} deleted")
    else:
        out.print(f"data source {reply['name']} ({reply['type']}) saved")
    return 0 if args.action != "test" or reply["ok"] else 1
