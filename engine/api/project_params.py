"""Project parameters (DolphinScheduler 3.2): name -> value for every task of a project.

A task sees them below everything else (engine.params.resolve): a workflow global of the same name wins, a
start parameter (which sets a global) wins over both, and built-ins outrank all. A *secret* parameter is
sealed with the secrets keyring before it is stored (engine/secretbox.py), never returned (``***``, as a
data source's password), and opened by the worker that runs the task: there it is a value like any other
(a SHELL task reads it from an environment variable, engine.tasks.placing). A PUT that sends ``***`` back
for a secret parameter keeps the stored value.

Readers of the project list them; writers set and delete them.
"""

from __future__ import annotations

import re
from typing import Any

from engine.api import access
from engine.api.projects import project_by_name
from engine.api.routing import PAGE, ApiError, Call, Route, not_found, page
from engine.params import BUILTIN_PREFIX, is_builtin
from engine.secretbox import MASK, PROJECT_PARAM_SECRETS, SecretError, seal_params

KIND = "project_parameter"
#: a name a ``${name}`` placeholder can reach: no ``$``, braces or white space
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.-]{0,254}$"

_PUT = {
    "type": "object",
    "required": ["value"],
    "additionalProperties": False,
    "properties": {
        "value": {"type": "string", "maxLength": 65536, "description": "*** keeps a secret parameter's stored value"},
        "secret": {"type": "boolean", "description": "sealed at rest and shown as ***; kept on edit when not given"},
    },
}
_PARAM = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "value": {"type": "string", "description": "*** for a secret parameter"},
        "secret": {"type": "boolean"},
        "update_time": {"type": "string", "format": "date-time"},
    },
}


def _public(row: Any) -> dict[str, Any]:
    secret = bool(row["secret"])
    return {
        "name": row["param_name"],
        "value": MASK if secret else row["param_value"],
        "secret": secret,
        "update_time": row["update_time"],
    }


def _check_name(name: str) -> None:
    if is_builtin(name):
        raise ApiError(400, f"{BUILTIN_PREFIX}* names are built-in parameters, which cannot be set", "path.param")
    if not re.match(NAME_PATTERN, name):
        raise ApiError(
            400, "a parameter name starts with a letter or _ and holds letters, digits, _ . - only", "path.param"
        )


async def list_params(api: Any, call: Call) -> dict[str, Any]:
    project = await project_by_name(api.db, call.path["name"])
    total = await api.db.fetchval("SELECT count(*) FROM project_parameter WHERE project_code = $1", project["code"])
    rows = await api.db.fetch(
        "SELECT param_name, param_value, secret, update_time FROM project_parameter WHERE project_code = $1"
        " ORDER BY param_name LIMIT $2 OFFSET $3",
        project["code"],
        call.query["size"],
        call.offset,
    )
    return page([_public(r) for r in rows], total, call)


async def put_param(api: Any, call: Call) -> dict[str, Any]:
    name = call.path["param"]
    _check_name(name)
    project = await project_by_name(api.db, call.path["name"])
    stored = await api.db.fetchrow(
        "SELECT param_value, secret FROM project_parameter WHERE project_code = $1 AND param_name = $2",
        project["code"],
        name,
    )
    secret = call.body.get("secret", bool(stored["secret"]) if stored is not None else False)
    value = call.body["value"]
    if secret and value == MASK:
        if stored is None or not stored["secret"]:
            raise ApiError(400, "no stored secret value to keep: give the value itself", "value")
        value = stored["param_value"]
    elif secret:
        try:
            value = seal_params(api.keyring, {"value": value}, PROJECT_PARAM_SECRETS, KIND)["value"]
        except SecretError as exc:
            raise ApiError(503, str(exc), "value") from None
    row = await api.db.fetchrow(
        "INSERT INTO project_parameter (project_code, param_name, param_value, secret, user_id)"
        " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (project_code, param_name) DO UPDATE SET"
        " param_value = EXCLUDED.param_value, secret = EXCLUDED.secret, update_time = now()"
        " RETURNING param_name, param_value, secret, update_time",
        project["code"],
        name,
        value,
        1 if secret else 0,
        call.user_id,
    )
    return _public(row)


async def delete_param(api: Any, call: Call) -> dict[str, Any]:
    project = await project_by_name(api.db, call.path["name"])
    deleted = await api.db.fetchval(
        "DELETE FROM project_parameter WHERE project_code = $1 AND param_name = $2 RETURNING param_name",
        project["code"],
        call.path["param"],
    )
    if deleted is None:
        raise not_found(f"project parameter {call.path['param']!r}")
    return {"deleted": deleted}


ROUTES = [
    Route("GET", "/api/v1/projects/{name}/parameters", list_params,
          "A project's parameters (secret values masked)", "project-parameters", query=PAGE, response=_PARAM,
          rule=access.read("project", "path.name")),
    Route("PUT", "/api/v1/projects/{name}/parameters/{param}", put_param,
          "Create or change a project parameter", "project-parameters", body=_PUT, response=_PARAM,
          rule=access.write("project", "path.name")),
    Route("DELETE", "/api/v1/projects/{name}/parameters/{param}", delete_param, "Delete a project parameter",
          "project-parameters", response={"type": "object", "properties": {"deleted": {"type": "string"}}},
          rule=access.write("project", "path.name")),
]  # fmt: skip
