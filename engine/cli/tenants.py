"""``porpoise tenant``: the OS users tasks run as, through the API (admins; docs/SECURITY.md).

porpoise tenant create NAME [--description TEXT]
porpoise tenant list
porpoise tenant delete NAME                      (refused while a workflow names it)
porpoise tenant grant NAME --project P           the project's workflows may then run as NAME
porpoise tenant revoke NAME --project P
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from engine.client import ApiClient, ApiClientError, connection_parser, discover


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    conn = connection_parser(common)
    tenant = sub.add_parser("tenant", help="tenants: OS users tasks run as (admins)")
    actions = tenant.add_subparsers(dest="action", required=True)
    p = actions.add_parser("create", parents=[conn], help="create a tenant (an OS user on the workers)")
    p.add_argument("name")
    p.add_argument("--description")
    actions.add_parser("list", parents=[conn], help="tenants and the projects granted them")
    actions.add_parser("delete", parents=[conn], help="delete a tenant no workflow uses").add_argument("name")
    for action, text in (("grant", "let a project's workflows run as the tenant"), ("revoke", "take that back")):
        p = actions.add_parser(action, parents=[conn], help=text)
        p.add_argument("name")
        p.add_argument("--project", required=True)


def _show(data: Any, args: argparse.Namespace, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else text)


def run(args: argparse.Namespace) -> int:
    client = ApiClient(discover(args.api, args.token, args.ca_file))
    if args.action == "create":
        body = {"name": args.name, **({"description": args.description} if args.description else {})}
        _show(client.post("/api/v1/tenants", body), args, f"created tenant {args.name}")
    elif args.action == "list":
        items = client.get("/api/v1/tenants", size=500)["items"]
        lines = [f"{t['name']:<24} {', '.join(t['projects']) or '-':<40} {t['description'] or ''}" for t in items]
        _show(items, args, "\n".join(lines) or "no tenants")
    elif args.action == "delete":
        _show(client.delete(f"/api/v1/tenants/{args.name}"), args, f"deleted tenant {args.name}")
    elif args.action == "grant":
        body = {"resource_type": "tenant", "resource": args.name, "project": args.project}
        _show(client.post("/api/v1/grants", body), args, f"granted tenant {args.name} to project {args.project}")
    else:
        grants = client.get("/api/v1/grants", resource_type="tenant", size=500)["items"]
        found = [g for g in grants if g["resource"] == args.name and g["project"] == args.project]
        if not found:
            raise ApiClientError(f"tenant {args.name!r} is not granted to project {args.project!r}")
        client.delete(f"/api/v1/grants/{found[0]['id']}")
        _show({"revoked": found[0]["id"]}, args, f"revoked tenant {args.name} from project {args.project}")
    return 0
