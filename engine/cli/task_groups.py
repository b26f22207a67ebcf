"""``porpoise task-group``: task groups (list, show, create, resize, delete), a group's queue with
positions, and force-start of a waiting task. Talks to the API; ``--json`` prints what it answered."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from engine.cli import targets
from engine.client import ApiClient, ApiClientError

ACTIONS = ["list", "show", "create", "resize", "delete", "queue", "force-start"]


def add_parsers(sub: Any, conn: argparse.ArgumentParser) -> None:
    p = sub.add_parser("task-group", parents=[conn], help="task groups: slots shared by the tasks that name them")
    p.add_argument("action", choices=ACTIONS)
    p.add_argument("target", nargs="?", help="group name (create), group id (show/resize/delete/queue), task id")
    p.add_argument("--size", type=int, help="create / resize: how many slots its tasks may hold at once")
    p.add_argument("--project", help="create: only this project's tasks may use it")
    p.add_argument("--description")


def _need(args: argparse.Namespace, what: str) -> str:
    return targets.need(args, "task-group", what)


def _id(args: argparse.Namespace, what: str) -> int:
    return targets.number(args, "task-group", what)


def _call(client: ApiClient, args: argparse.Namespace) -> Any:
    if args.action == "list":
        return client.get("/api/v1/task-groups", size=500)
    if args.action == "show":
        return client.get(f"/api/v1/task-groups/{_id(args, 'group id')}")
    if args.action == "create":
        if args.size is None:
            raise ApiClientError("task-group create: --size is required")
        body: dict[str, Any] = {"name": _need(args, "group name"), "size": args.size}
        if args.project:
            body["project"] = args.project
        if args.description is not None:
            body["description"] = args.description
        return client.post("/api/v1/task-groups", body)
    if args.action == "resize":
        if args.size is None:
            raise ApiClientError("task-group resize: --size is required")
        return client.patch(f"/api/v1/task-groups/{_id(args, 'group id')}", {"size": args.size})
    if args.action == "delete":
        return client.delete(f"/api/v1/task-groups/{_id(args, 'group id')}")
    if args.action == "queue":
        return client.get(f"/api/v1/task-groups/{_id(args, 'group id')}/queue", size=500)
    return client.post(f"/api/v1/task-groups/queue/{_id(args, 'task instance id')}/force-start")


def cmd_task_group(client: ApiClient, args: argparse.Namespace, out: Console) -> int:
    reply = _call(client, args)
    if args.json:
        print(json.dumps(reply))
        return 0
    if args.action == "list":
        table = Table("id", "name", "project", "used / size", "waiting")
        for g in reply["items"]:
            table.add_row(str(g["id"]), g["name"], g["project"] or "-", f"{g['used']} / {g['size']}", str(g["waiting"]))
        out.print(table)
    elif args.action == "queue":
        table = Table("task instance", "task", "workflow instance", "status", "position", "priority", "slots")
        for e in reply["items"]:
            status = e["status"] + (" (forced)" if e["forced"] else "")
            table.add_row(str(e["task_instance_id"]), e["task"] or "-", str(e["workflow_instance_id"]), status,
                          str(e["position"] or "-"), str(e["priority"]), str(e["slots"]))  # fmt: skip
        out.print(table)
    elif args.action == "delete":
        out.print(f"task group {reply['deleted']} deleted")
    elif args.action == "force-start":
        out.print(f"task instance {reply['task_instance_id']} force-started: it runs beyond its group's size")
    else:
        out.print(f"task group {reply['id']} {reply['name']}: {reply['used']} / {reply['size']} slots used, "
                  f"{reply['waiting']} waiting")  # fmt: skip
    return 0
