"""``porpoise environment``: named blocks of shell exports tasks run before their script, through the API
(admins create, edit, delete and grant them; engine/api/environments.py).

porpoise environment create NAME --file FILE|- [--description TEXT] [--worker-group G ...]
porpoise environment list
porpoise environment update NAME [--file FILE|-] [--description TEXT] [--worker-group G ...]
porpoise environment delete NAME                  (refused while a workflow names it)
porpoise environment grant NAME --project P | --user U
porpoise environment revoke NAME --project P | --user U
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from engine.client import ApiClient, ApiClientError, connection_parser, discover


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    conn = connection_parser(common)
    env = sub.add_parser("environment", help="environments: shell exports tasks run before their script (admins)")
    actions = env.add_subparsers(dest="action", required=True)
    for action, text in (("create", "create an environment"), ("update", "change an environment")):
        p = actions.add_parser(action, parents=[conn], help=text)
        p.add_argument("name")
        p.add_argument(
            "--file", dest="config_file", required=action == "create", help="its shell lines: a file, - for stdin"
        )
        p.add_argument("--description")
        p.add_argument("--worker-group", action="append", dest="worker_groups", help="a worker group it is for")
    actions.add_parser("list", parents=[conn], help="environments you may use")
    actions.add_parser("delete", parents=[conn], help="delete an environment no workflow names").add_argument("name")
    for action, text in (("grant", "let a project's (or a user's) workflows name it"), ("revoke", "take that back")):
        p = actions.add_parser(action, parents=[conn], help=text)
        p.add_argument("name")
        who = p.add_mutually_exclusive_group(required=True)
        who.add_argument("--project")
        who.add_argument("--user")


def _show(data: Any, args: argparse.Namespace, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else text)


def _config(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    try:
        return Path(source).read_text()
    except OSError as exc:
        raise ApiClientError(f"cannot read --file {source}: {exc.strerror}") from None


def _body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if args.config_file is not None:
        body["config"] = _config(args.config_file)
    if args.description is not None:
        body["description"] = args.description
    if args.worker_groups is not None:
        body["worker_groups"] = args.worker_groups
    return body


def run(args: argparse.Namespace) -> int:
    client = ApiClient(discover(args.api, args.token, args.ca_file))
    one = f"/api/v1/environments/{quote(args.name, safe='')}" if hasattr(args, "name") else ""
    if args.action == "create":
        answer = client.post("/api/v1/environments", {"name": args.name, **_body(args)})
        _show(answer, args, f"created environment {args.name}")
    elif args.action == "update":
        body = _body(args)
        if not body:
            raise ApiClientError("environment update: give --file, --description or --worker-group")
        _show(client.patch(one, body), args, f"updated environment {args.name}")
    elif args.action == "list":
        items = client.get("/api/v1/environments", size=500)["items"]
        lines = [
            f"{e['name']:<24} groups: {', '.join(e['worker_groups']) or '-':<24}"
            f" projects: {', '.join(e['projects']) or '-'}"
            for e in items
        ]
        _show(items, args, "\n".join(lines) or "no environments")
    elif args.action == "delete":
        _show(client.delete(one), args, f"deleted environment {args.name}")
    else:
        to = {"project": args.project} if args.project else {"user": args.user}
        whom = f"project {args.project}" if args.project else f"user {args.user}"
        if args.action == "grant":
            body = {"resource_type": "environment", "resource": args.name, **to}
            _show(client.post("/api/v1/grants", body), args, f"granted environment {args.name} to {whom}")
            return 0
        grants = client.get("/api/v1/grants", resource_type="environment", size=500)["items"]
        found = [g for g in grants if g["resource"] == args.name and all(g[k] == v for k, v in to.items())]
        if not found:
            raise ApiClientError(f"environment {args.name!r} is not granted to {whom}")
        client.delete(f"/api/v1/grants/{found[0]['id']}")
        _show({"revoked": found[0]["id"]}, args, f"revoked environment {args.name} from {whom}")
    return 0
