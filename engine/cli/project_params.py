"""``porpoise project-param``: a project's parameters, through the API (docs/WORKFLOWS.md, "Parameters").

porpoise project-param list PROJECT                          secret values shown as ***
porpoise project-param set PROJECT NAME [VALUE] [--secret]   VALUE omitted: read from standard input
porpoise project-param delete PROJECT NAME
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import quote

from engine.client import ApiClient, connection_parser, discover


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    conn = connection_parser(common)
    param = sub.add_parser("project-param", help="project parameters: values every task of a project sees")
    actions = param.add_subparsers(dest="action", required=True)
    actions.add_parser("list", parents=[conn], help="a project's parameters").add_argument("project")
    p = actions.add_parser("set", parents=[conn], help="create or change a project parameter")
    p.add_argument("project")
    p.add_argument("name")
    p.add_argument("value", nargs="?", help="the value (omitted: read from standard input, e.g. for a secret)")
    p.add_argument("--secret", action="store_true", help="sealed at rest, shown as *** and masked in task logs")
    p = actions.add_parser("delete", parents=[conn], help="delete a project parameter")
    p.add_argument("project")
    p.add_argument("name")


def _show(data: Any, args: argparse.Namespace, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else text)


def run(args: argparse.Namespace) -> int:
    client = ApiClient(discover(args.api, args.token, args.ca_file))
    base = f"/api/v1/projects/{quote(args.project, safe='')}/parameters"
    if args.action == "list":
        items = client.get(base, size=500)["items"]
        lines = [f"{p['name']:<32} {p['value']}{'  (secret)' if p['secret'] else ''}" for p in items]
        _show(items, args, "\n".join(lines) or f"project {args.project} has no parameters")
    elif args.action == "set":
        value = args.value if args.value is not None else sys.stdin.read().removesuffix("\n")
        body: dict[str, Any] = {"value": value, **({"secret": True} if args.secret else {})}
        answer = client.put(f"{base}/{quote(args.name, safe='')}", body)
        _show(answer, args, f"set project parameter {args.name} of project {args.project}")
    else:
        answer = client.delete(f"{base}/{quote(args.name, safe='')}")
        _show(answer, args, f"deleted project parameter {args.name} of project {args.project}")
    return 0
