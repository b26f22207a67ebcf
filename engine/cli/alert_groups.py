"""``porpoise alert-group``: alert groups and their senders (list, show, delete), a test alert sent to every
sender of a group now (``test``: each sender's outcome; exit 1 when one failed), and the alert history with
each alert's delivery (``alerts``). Talks to the API; ``--json`` prints what it answered."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from engine.cli import targets
from engine.client import ApiClient

ACTIONS = ["list", "show", "delete", "test", "alerts"]


def add_parsers(sub: Any, conn: argparse.ArgumentParser) -> None:
    p = sub.add_parser("alert-group", parents=[conn], help="alert groups: where alerts are sent, and their history")
    p.add_argument("action", choices=ACTIONS)
    p.add_argument("target", nargs="?", help="group id (show/delete/test); alerts: a workflow instance id")


def _id(args: argparse.Namespace, what: str) -> int:
    return targets.number(args, "alert-group", what)


def _call(client: ApiClient, args: argparse.Namespace) -> Any:
    if args.action == "list":
        return client.get("/api/v1/alert-groups", size=500)
    if args.action == "show":
        return client.get(f"/api/v1/alert-groups/{_id(args, 'group id')}")
    if args.action == "delete":
        return client.delete(f"/api/v1/alert-groups/{_id(args, 'group id')}")
    if args.action == "test":
        return client.post(f"/api/v1/alert-groups/{_id(args, 'group id')}/test")
    query = {"instance": _id(args, "workflow instance id")} if args.target else {}
    return client.get("/api/v1/alerts", size=100, **query)


def cmd_alert_group(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    reply = _call(client, args)
    failed = args.action == "test" and not all(s["sent"] for s in reply["senders"])
    if args.json:
        print(json.dumps(reply))
        return 1 if failed else 0
    if args.action == "list":
        table = Table("id", "name", "senders")
        for g in reply["items"]:
            table.add_row(str(g["id"]), g["name"], ", ".join(f"{s['name']} ({s['type']})" for s in g["senders"]))
        out.print(table)
    elif args.action == "show":
        out.print(f"alert group {reply['id']} {reply['name']}")
        for s in reply["senders"]:
            out.print(f"  {s['name']} ({s['type']}): {json.dumps(s['params'])}")
    elif args.action == "delete":
        out.print(f"alert group {reply['deleted']} deleted")
    elif args.action == "test":
        for s in reply["senders"]:
            out.print(f"{s['name']} ({s['type']}): " + ("sent" if s["sent"] else f"FAILED: {s['error']}"))
        if not reply["senders"]:
            out.print("the group has no sender")
    else:
        table = Table("id", "title", "type", "status", "attempts", "instance", "errors")
        for a in reply["items"]:
            errors = json.loads(a["log"]).get("errors", {}) if a.get("log") else {}
            why = "; ".join(f"{k}: {v}" for k, v in errors.items())
            instance = str(a["workflow_instance_id"] or "-")
            table.add_row(str(a["id"]), a["title"], a["alert_type"], a["status"], str(a["attempts"]), instance, why)
        out.print(table)
    return 1 if failed else 0
