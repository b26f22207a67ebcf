"""The OpenAPI 3.1 document, built from the route table (so it cannot drift from the routes), and a
self-contained HTML page that renders it for browsing."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from typing import Any

from engine import __version__
from engine.api.routing import ERROR_SCHEMA, Param, Route
from engine.api.tasks import TASK_INSTANCE
from engine.workflows.document import SCHEMA, TASK_SCHEMA

_KINDS = {int: {"type": "integer"}, bool: {"type": "boolean"}, str: {"type": "string"}}


def _param_schema(p: Param) -> dict[str, Any]:
    schema = dict(_KINDS.get(p.kind, {"type": "string", "format": "date-time"}))
    if p.choices:
        schema["enum"] = list(p.choices)
    if p.minimum is not None:
        schema["minimum"] = p.minimum
    if p.maximum is not None:
        schema["maximum"] = p.maximum
    if p.default is not None:
        schema["default"] = p.default
    return schema


def _workflow_schema() -> dict[str, Any]:
    """The workflow document schema with its $defs moved to components (OpenAPI style refs)."""
    text = json.dumps({k: v for k, v in SCHEMA.items() if k != "$defs"})
    return json.loads(text.replace('"#/$defs/Task"', '"#/components/schemas/Task"'))  # type: ignore[no-any-return]


def _body_schema(route: Route) -> dict[str, Any]:
    if route.body is SCHEMA:
        return {"$ref": "#/components/schemas/Workflow"}
    return route.body or {}


def _operation(route: Route) -> dict[str, Any]:
    names = re.findall(r"{(\w+)}", route.path)
    params: list[dict[str, Any]] = [
        {"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names
    ]
    params += [
        {"name": p.name, "in": "query", "required": False, "description": p.description, "schema": _param_schema(p)}
        for p in route.query
    ]
    answer = route.response
    if any(p.name == "page" for p in route.query):
        answer = {
            "type": "object",
            "required": ["items", "total", "page", "size"],
            "properties": {
                "items": {"type": "array", "items": route.response},
                "total": {"type": "integer"},
                "page": {"type": "integer"},
                "size": {"type": "integer"},
            },
        }
        if any(p.name == "before" for p in route.query):
            answer["properties"]["next_before"] = {
                "type": ["integer", "null"],
                "description": "the `before` of the next page (keyset paging); null on the last page",
            }
            answer["properties"]["total_capped"] = {
                "type": "boolean",
                "description": "there are more matches than total (counting stops there; page on with before)",
            }
    error = {
        "description": "error",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    op: dict[str, Any] = {
        "summary": route.summary,
        "operationId": f"{route.method.lower()}_{re.sub(r'[^a-z0-9]+', '_', route.path.lower()).strip('_')}",
        "tags": [route.tag],
        "parameters": params,
        "responses": {
            str(route.status): {"description": "success", "content": {route.produces: {"schema": answer}}},
            "400": error,
            "404": error,
            "409": error,
        },
    }
    if route.auth:
        op["responses"]["401"] = error
        op["responses"]["403"] = error
    if route.rule is not None:
        # who may call it (engine/api/access.py): public, user, admin, or a right on the resource's project
        find = route.rule.find
        op["x-permission"] = route.rule.need.value + (f" ({find.kind} from {find.source})" if find else "")
    else:
        op["security"] = []
    if route.consumes:
        op["requestBody"] = {
            "required": True,
            "content": {
                route.consumes: {"schema": {"type": "string", "format": "binary"}},
                "multipart/form-data": {
                    "schema": {"type": "object", "properties": {"file": {"type": "string", "format": "binary"}}}
                },
            },
        }
    if route.body is not None:
        op["requestBody"] = {
            "required": route.body_required,
            "content": {"application/json": {"schema": _body_schema(route)}},
        }
    return op


def document(routes: Sequence[Route]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    paths["/health"] = {
        "get": {"summary": "Liveness of the API server (it answers)", "operationId": "get_health",
                "tags": ["meta"], "security": [], "responses": {"200": {"description": "alive"}}}
    }  # fmt: skip
    paths["/ready"] = {
        "get": {"summary": "Readiness of the API server (database and registry reachable)", "operationId": "get_ready",
                "tags": ["meta"], "security": [],
                "responses": {"200": {"description": "ready"}, "503": {"description": "not ready"}}}
    }  # fmt: skip
    paths["/metrics"] = {
        "get": {"summary": "Prometheus metrics (docs/METRICS.md)", "operationId": "get_metrics", "tags": ["meta"],
                "security": [], "responses": {"200": {"description": "the Prometheus text format"}}}
    }  # fmt: skip
    paths["/openapi.json"] = {
        "get": {"summary": "This document", "operationId": "get_openapi", "tags": ["meta"], "security": [],
                "responses": {"200": {"description": "the OpenAPI document"}}}
    }  # fmt: skip
    paths["/docs"] = {
        "get": {"summary": "Browsable API documentation", "operationId": "get_docs", "tags": ["meta"],
                "security": [], "responses": {"200": {"description": "HTML"}}}
    }  # fmt: skip
    ui = {
        "summary": "The web UI (a single-page app; its pages and assets)",
        "tags": ["meta"],
        "security": [],
        "responses": {"200": {"description": "HTML, or a file of the app"}, "404": {"description": "not built"}},
    }
    paths["/"] = {"get": {**ui, "operationId": "get_ui"}}
    paths["/{path}"] = {
        "get": {
            **ui,
            "operationId": "get_ui_path",
            "parameters": [{"name": "path", "in": "path", "required": True, "schema": {"type": "string"}}],
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Porpoise API",
            "version": __version__,
            "description": "Workflow definitions, runs, logs and the cluster of the Porpoise scheduler. "
            "Authenticate with `Authorization: Bearer <token>`.",
        },
        "paths": paths,
        "components": {
            "schemas": {
                "Workflow": _workflow_schema(),
                "Task": TASK_SCHEMA,
                "TaskInstance": TASK_INSTANCE,
                "Error": ERROR_SCHEMA,
            },
            "securitySchemes": {
                "token": {"type": "http", "scheme": "bearer"},
                "session": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "porpoise_session",
                    "description": "POST /api/v1/login; calls that change something also need X-CSRF-Token",
                },
            },
        },
        "security": [{"token": []}, {"session": []}],
    }


def docs_page(doc: dict[str, Any]) -> str:
    """One HTML page listing every operation with its parameters and body schema (no external assets)."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Porpoise API</title><style>"
        "body{font-family:system-ui,sans-serif;max-width:70em;margin:2em auto;padding:0 1em;color:#222}"
        "h2{border-bottom:1px solid #ccc;margin-top:2em}.op{margin:1em 0;padding:.5em 1em;background:#f7f7f9;"
        "border-radius:6px}.m{font-weight:bold;display:inline-block;width:5em}code,pre{font-size:90%}"
        "pre{background:#fff;padding:.5em;overflow:auto}</style></head><body>",
        f"<h1>{html.escape(doc['info']['title'])} {html.escape(doc['info']['version'])}</h1>",
        f"<p>{html.escape(doc['info']['description'])} "
        "Machine-readable: <a href='/openapi.json'>/openapi.json</a>.</p>",
    ]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            by_tag.setdefault(op["tags"][0], []).append((method.upper(), path, op))
    for tag, ops in by_tag.items():
        parts.append(f"<h2>{html.escape(tag)}</h2>")
        for method, path, op in ops:
            parts.append(f"<div class='op'><span class='m'>{method}</span><code>{html.escape(path)}</code>"
                         f"<p>{html.escape(op['summary'])}</p>")  # fmt: skip
            query = [p for p in op.get("parameters", []) if p["in"] == "query"]
            if query:
                items = "".join(
                    f"<li><code>{html.escape(p['name'])}</code> {html.escape(p.get('description', ''))}</li>"
                    for p in query
                )
                parts.append(f"<ul>{items}</ul>")
            body = op.get("requestBody")
            if body:
                media, first = next(iter(body["content"].items()))
                schema = body["content"].get("application/json", first)["schema"]
                if media != "application/json":
                    schema = {"content": f"{', '.join(body['content'])}", **schema}
                if "$ref" in schema:
                    schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
                parts.append(f"<details><summary>request body</summary><pre>{html.escape(json.dumps(schema, indent=2))}"
                             "</pre></details>")  # fmt: skip
            parts.append("</div>")
    parts.append("</body></html>")
    return "".join(parts)


def main() -> None:
    """``python -m engine.api.openapi``: print the document (ui/openapi.json is this output, committed)."""
    from engine.api.server import ROUTES  # the server imports this module

    print(json.dumps(document(ROUTES), indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
