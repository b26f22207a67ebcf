"""``porpoise worker-group``: worker groups managed in the cluster, through the API (admins change them;
engine/api/worker_groups.py). Masters pick a change up within ``master.worker_group_refresh_interval``.

porpoise worker-group list
porpoise worker-group create NAME --worker HOST:PORT [--worker ...] [--description TEXT]
porpoise worker-group update NAME [--worker HOST:PORT ...] [--description TEXT]   (--worker: the new list)
porpoise worker-group delete NAME                                             (refused while a workflow uses it)
"""

from __future__ import annotations

import argparse
import json
from typing import Any
from urllib.parse import quote

from engine.client import ApiClient, ApiClientError, connection_parser, discover


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    conn = connection_parser(common)
    group = sub.add_parser("worker-group", help="worker groups: which workers run which tasks (admins change them)")
    actions = group.add_subparsers(dest="action", required=True)
    actions.add_parser("list", parents=[conn], help="worker groups with their assigned and live workers")
    for action, text in (("create", "create a worker group"), ("update", "change a worker group's workers")):
        p = actions.add_parser(action, parents=[conn], help=text)
        p.add_argument("name")
        p.add_argument("--worker", action="append", dest="workers", required=action == "create",
                       help="a worker's address (host:port, as `porpoise cluster` lists it)")  # fmt: skip
        p.add_argument("--description")
    actions.add_parser("delete", parents=[conn], help="delete a worker group").add_argument("name")


def _show(data: Any, args: argparse.Namespace, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else text)


def run(args: argparse.Namespace) -> int:
    client = ApiClient(discover(args.api, args.token, args.ca_file))
    if args.action == "list":
        items = client.get("/api/v1/worker-groups", size=500)["items"]
        lines = [
            f"{g['name']:<24} assigned: {', '.join(g['addresses']) or '-':<30} live: {', '.join(g['live']) or 'none'}"
            for g in items
        ]
        _show(items, args, "\n".join(lines) or "no worker groups")
        return 0
    one = f"/api/v1/worker-groups/{quote(args.name, safe='')}"
    if args.action == "delete":
        _show(client.delete(one), args, f"deleted worker group {args.name}")
        return 0
    body: dict[str, Any] = {}
    if args.workers is not None:
        body["addresses"] = args.workers
    if args.description is not None:
        body["description"] = args.description
    if args.action == "create":
        answer = client.post("/api/v1/worker-groups", {"name": args.name, **body})
        _show(answer, args, f"created worker group {args.name}: {', '.join(answer['addresses'])}")
    else:
        if not body:
            raise ApiClientError("worker-group update: give --worker or --description")
        answer = client.patch(one, body)
        _show(answer, args, f"updated worker group {args.name}: {', '.join(answer['addresses']) or 'no workers'}")
    return 0
