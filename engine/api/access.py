"""Who may call what: the permission model every API route declares once (``Route(rule=...)``).

A :class:`Rule` names the right a call needs and, for project resources, where the route finds the project
(:class:`Find`: a workflow code in the path, an instance id, a project name in the body ...). ``check`` runs
in routing.bind before the handler, so a handler never sees a call its caller may not make:

- PUBLIC: anyone; USER: any signed-in user; ADMIN: an admin (with a token of full rights);
- READ / EXECUTE / WRITE: that right on the resource's project; OWNER: the project's owner (or an admin).

Rights on a project (DolphinScheduler's bits, t_ds_relation_project_user.perm): EXECUTE 1, READ 2, WRITE 4.
Admins and the owner hold all three; a grant of any right lets its user see the project (READ). A token may
carry fewer rights than its user (``access_token.perm``); such a token never has admin rights.

A resource the caller may not see answers 404 with the same message as one that does not exist (nothing
leaks); one it may see but not change answers 403 naming the right it lacks. Data sources and alert groups
are seen by the users (and the members of the projects) an admin granted them to.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import asyncpg

from engine.api.routing import PRINCIPAL, PROJECT_CODE, ApiError, Call, path_int, quoted

EXECUTE, READ, WRITE = 1, 2, 4
ALL = EXECUTE | READ | WRITE
PERM_NAMES = {"EXECUTE": EXECUTE, "READ": READ, "WRITE": WRITE}


def perm_names(bits: int) -> list[str]:
    return [name for name, bit in PERM_NAMES.items() if bits & bit]


def perm_bits(names: list[str]) -> int:
    bits = 0
    for name in names:
        bits |= PERM_NAMES[name]
    return bits


class Need(enum.Enum):
    PUBLIC = "public"
    USER = "user"
    ADMIN = "admin"
    READ = "read"
    EXECUTE = "execute"
    WRITE = "write"
    OWNER = "owner"


_BIT = {Need.READ: READ, Need.EXECUTE: EXECUTE, Need.WRITE: WRITE}

#: resource kinds a Find can name, and the query giving (project code, resource id) from the value
_LOOKUP = {
    "project": "SELECT code, code FROM project WHERE name = $1",
    "workflow": "SELECT project_code, code FROM workflow_definition WHERE code = $1",
    "instance": "SELECT project_code, id FROM workflow_instance WHERE id = $1",
    "task": "SELECT wi.project_code, ti.id FROM task_instance ti"
    " JOIN workflow_instance wi ON wi.id = ti.workflow_instance_id WHERE ti.id = $1",
    "schedule": "SELECT d.project_code, s.id FROM schedule s"
    " JOIN workflow_definition d ON d.code = s.workflow_definition_code WHERE s.id = $1",
    "command": "SELECT d.project_code, x.id FROM (SELECT id, workflow_definition_code FROM command WHERE id = $1"
    " UNION ALL SELECT id, workflow_definition_code FROM error_command WHERE id = $1"
    " UNION ALL SELECT command_id, workflow_definition_code FROM workflow_instance WHERE command_id = $1) x"
    " JOIN workflow_definition d ON d.code = x.workflow_definition_code LIMIT 1",
    "datasource": "SELECT NULL::bigint, id FROM datasource WHERE name = $1",
    "alert_group": "SELECT NULL::bigint, id FROM alert_group WHERE id = $1",
}
#: a project's row as project rights read it: whether it was found, whether user $2 owns it, and the rights
#: granted to them on it
_RIGHTS = (
    "p.code IS NOT NULL AS found, p.user_id = $2 AS owner,"
    " (SELECT perm FROM project_user WHERE project_code = p.code AND user_id = $2) AS perm"
)
#: each project-scoped lookup with the rights of user $2 on the project it names (_RIGHTS' columns after its two)
_WITH_RIGHTS = {
    kind: f"SELECT r.*, {_RIGHTS} FROM ({query}) r(project_code, resource_id)"
    " LEFT JOIN project p ON p.code = r.project_code"
    for kind, query in _LOOKUP.items()
}
_INT_KINDS = {"workflow", "instance", "task", "schedule", "command", "alert_group"}
_WHAT = {
    "project": "project {!r}",
    "workflow": "workflow {}",
    "instance": "workflow instance {}",
    "task": "task instance {}",
    "schedule": "schedule {}",
    "command": "command {}",
    "datasource": "data source {!r}",
    "alert_group": "alert group {}",
}
#: resource kinds granted by an admin (resource_grant.resource_type) rather than living in a project
GRANTED = ("datasource", "alert_group", "tenant", "environment")


@dataclass(frozen=True)
class Find:
    """Where a route names the resource it touches: ``kind`` (a key of _LOOKUP) read from ``source``,
    ``path.<param>`` or ``body.<field>``."""

    kind: str
    source: str
    #: the value when the source is absent, computed from the body (an import's project named in its file)
    default: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if self.kind not in _LOOKUP or self.source.split(".")[0] not in ("path", "body"):
            raise ValueError(f"bad Find({self.kind!r}, {self.source!r})")


@dataclass(frozen=True)
class Rule:
    need: Need
    find: Find | None = None
    #: Find names a project that may not exist yet: any signed-in user may create it (and owns it)
    create: bool = False
    #: granted resources (data sources, alert groups) the body may name: when present, each must be granted
    #: to the caller (or to a project it sees), else 404 naming the field
    uses: tuple[Find, ...] = ()

    def __post_init__(self) -> None:
        if (self.find is None) != (self.need in (Need.PUBLIC, Need.USER, Need.ADMIN)):
            raise ValueError(f"{self.need.name} rules need a Find, the others none")


PUBLIC = Rule(Need.PUBLIC)
SIGNED_IN = Rule(Need.USER)
ADMIN = Rule(Need.ADMIN)


def read(kind: str, source: str) -> Rule:
    return Rule(Need.READ, Find(kind, source))


def execute(kind: str, source: str, uses: tuple[Find, ...] = ()) -> Rule:
    return Rule(Need.EXECUTE, Find(kind, source), uses=uses)


def write(kind: str, source: str, create: bool = False, uses: tuple[Find, ...] = ()) -> Rule:
    return Rule(Need.WRITE, Find(kind, source), create, uses)


#: the alert group a start, backfill or schedule sends its alerts to
WARNING_GROUP = Find("alert_group", "body.warning_group_id")


def owner(kind: str, source: str) -> Rule:
    return Rule(Need.OWNER, Find(kind, source))


@dataclass(frozen=True)
class Principal:
    """The caller: a user, through a token (maybe of reduced rights) or a browser session."""

    user_id: int
    user_name: str
    is_admin: bool
    #: rights the token is limited to (None: all of its user's)
    perm_cap: int | None = None
    via: str = "token"
    token_id: int | None = None
    #: seconds the token was still valid for when it was looked up (None: it never expires); a cache
    #: keeps it no longer than that
    valid_for: float | None = dataclasses.field(default=None, compare=False)

    @property
    def admin(self) -> bool:
        """Admin rights: an admin user calling with full rights."""
        return self.is_admin and self.perm_cap is None


def principal_of(call: Call) -> Principal:
    principal = call.request.get(PRINCIPAL)
    if not isinstance(principal, Principal):
        raise ApiError(401, "sign in first (Authorization: Bearer <token>, or POST /api/v1/login)")
    return principal


# -- project rights ------------------------------------------------------------------------------


def visible_projects_sql(n: int) -> str:
    """SQL for the codes of the projects user $n sees (owner or any grant); admins see all (no filter)."""
    return (
        f"(SELECT code FROM project WHERE user_id = ${n}"
        f" UNION SELECT project_code FROM project_user WHERE user_id = ${n})"
    )


def visible_granted_sql(kind: str, n: int) -> str:
    """SQL for the ids of the data sources / alert groups user $n was granted, directly or by a project."""
    return (
        f"(SELECT resource_id FROM resource_grant WHERE resource_type = '{kind}'"
        f" AND (user_id = ${n} OR project_code IN {visible_projects_sql(n)}))"
    )


async def project_rights(db: asyncpg.Pool | asyncpg.Connection, who: Principal, code: int) -> tuple[int, int]:
    """(rights the user holds on project ``code``, rights this call may use): 0 when it may not see it."""
    row = await db.fetchrow(f"SELECT {_RIGHTS} FROM project p WHERE p.code = $1", code, who.user_id)
    return _rights(who, row)


def _rights(who: Principal, row: Any) -> tuple[int, int]:
    """project_rights from a row of ``_RIGHTS`` (None, or not ``found``: no such project)."""
    if row is None or not row["found"]:
        return 0, 0
    if who.is_admin or row["owner"]:
        held = ALL
    elif row["perm"]:
        held = int(row["perm"]) | READ
    else:
        held = 0
    return held, held if who.perm_cap is None else held & who.perm_cap


async def _granted(db: asyncpg.Pool | asyncpg.Connection, who: Principal, kind: str, resource_id: int) -> bool:
    if who.is_admin:
        return True
    return bool(await db.fetchval(f"SELECT $2::bigint IN {visible_granted_sql(kind, 1)}", who.user_id, resource_id))


def check_may_create(who: Principal, field: str | None = None) -> None:
    """Creating a project needs credentials that may write: a session, or a token carrying WRITE."""
    if who.perm_cap is not None and not who.perm_cap & WRITE:
        raise ApiError(403, "this token does not carry the WRITE right, which creating a project needs", field)


def _value(call: Call, find: Find) -> Any:
    where, _, name = find.source.partition(".")
    if where == "path":
        raw: Any = call.path.get(name)
    else:
        raw = call.body.get(name) if isinstance(call.body, dict) else None
    if (raw is None or raw == "") and find.default is not None:
        raw = find.default(call.body)
    if raw is None or raw == "":
        raise ApiError(400, "is required", find.source)
    if find.kind in _INT_KINDS:
        if isinstance(raw, bool):
            raise ApiError(400, f"must be an integer, got {raw!r}", find.source)
        return path_int(raw, find.source)
    if not isinstance(raw, str):
        raise ApiError(400, f"must be a string, got {quoted(raw)}", find.source)
    return raw


async def check(db: asyncpg.Pool, rule: Rule, call: Call) -> None:
    """Raise the ApiError (401, 403 or 404) the caller gets for ``call`` under ``rule``; on success note the
    project the call touches in ``call.request[PROJECT_CODE]`` (audit log)."""
    if rule.need is Need.PUBLIC:
        return
    who = principal_of(call)
    if rule.need is Need.USER:
        return
    if rule.need is Need.ADMIN:
        if not who.admin:
            raise ApiError(
                403, "only an admin may do this" + (" (this token has reduced rights)" if who.is_admin else "")
            )
        return
    assert rule.find is not None
    await _check_main(db, rule, who, call)
    for use in rule.uses:
        await _check_use(db, who, use, call)


async def _check_use(db: asyncpg.Pool, who: Principal, use: Find, call: Call) -> None:
    name = use.source.partition(".")[2]
    raw = call.body.get(name) if isinstance(call.body, dict) else None
    if raw is None:
        return
    value = _value(call, use)
    row = await db.fetchrow(_LOOKUP[use.kind], value)
    if row is None or not await _granted(db, who, use.kind, int(row[1])):
        raise ApiError(404, f"{_WHAT[use.kind].format(value)} does not exist", name)


async def _check_main(db: asyncpg.Pool, rule: Rule, who: Principal, call: Call) -> None:
    assert rule.find is not None
    value = _value(call, rule.find)
    what = _WHAT[rule.find.kind].format(value)
    if rule.find.kind in GRANTED:
        row = await db.fetchrow(_LOOKUP[rule.find.kind], value)
    else:  # the resource and the caller's rights on its project in one round trip
        row = await db.fetchrow(_WITH_RIGHTS[rule.find.kind], value, who.user_id)
    # a resource named in the body is a field of the request: the error names it
    field = rule.find.source.partition(".")[2] if rule.find.source.startswith("body.") else None
    if row is None:
        if rule.create:
            check_may_create(who, field)
            return
        raise ApiError(404, f"{what} does not exist", field)
    code, resource_id = row[0], row[1]
    if rule.find.kind in GRANTED:
        # data sources and alert groups: seen by grantees; changed only by admins (ADMIN rules)
        if not await _granted(db, who, rule.find.kind, int(resource_id)):
            raise ApiError(404, f"{what} does not exist")
        if rule.need is not Need.READ and not who.admin:
            raise ApiError(403, f"only an admin may change {what}")
        return
    held, usable = _rights(who, row)
    if not held:
        raise ApiError(404, f"{what} does not exist", field)
    call.request[PROJECT_CODE] = int(code)
    if rule.need is Need.OWNER:
        if not (who.admin or await db.fetchval("SELECT user_id = $2 FROM project WHERE code = $1", code, who.user_id)):
            raise ApiError(403, f"only the owner of the project of {what} (or an admin) may do this")
        if who.perm_cap is not None and who.perm_cap != ALL:
            raise ApiError(403, "this token has reduced rights")
        return
    bit = _BIT[rule.need]
    if not usable & bit:
        lacking = rule.need.name if held & bit else f"{rule.need.name} right on the project of {what}"
        if held & bit:
            raise ApiError(403, f"this token does not carry the {lacking} right")
        raise ApiError(403, f"you need the {lacking}")


def project_filter(call: Call, column: str) -> Any:
    """For select_page: the caller's visible projects as a condition on ``column`` (None for admins)."""
    who = principal_of(call)
    if who.is_admin:
        return None
    return lambda n: f"{column} IN {visible_projects_sql(n)}"


def granted_filter(call: Call, kind: str, column: str = "id") -> Any:
    """For select_page: the data sources / alert groups granted to the caller (None for admins)."""
    who = principal_of(call)
    if who.is_admin:
        return None
    return lambda n: f"{column} IN {visible_granted_sql(kind, n)}"


def project_clause(call: Call, column: Any) -> list[Any]:
    """The same as project_filter for SQLAlchemy queries: a list of 0 or 1 where-clauses."""
    from sqlalchemy import select

    from engine.storage import tables as t

    who = principal_of(call)
    if who.is_admin:
        return []
    owned = select(t.project.c.code).where(t.project.c.user_id == who.user_id)
    granted = select(t.project_user.c.project_code).where(t.project_user.c.user_id == who.user_id)
    return [column.in_(owned.union(granted))]


async def check_datasources(
    db: asyncpg.Pool | asyncpg.Connection, who: Principal, used: Iterable[str], project: str
) -> None:
    """A general user may name in a workflow of ``project`` only data sources an admin granted to them or to
    that project (403 naming the others, whether they exist or not)."""
    names = sorted(set(used))
    if who.is_admin or not names:
        return
    rows = await db.fetch(
        "SELECT d.name FROM datasource d JOIN resource_grant g ON g.resource_type = 'datasource'"
        " AND g.resource_id = d.id WHERE d.name = ANY($1::text[])"
        " AND (g.user_id = $2 OR g.project_code = (SELECT code FROM project WHERE name = $3))",
        names,
        who.user_id,
        project,
    )
    missing = [n for n in names if n not in {r["name"] for r in rows}]
    if missing:
        listed = ", ".join(repr(n) for n in missing)
        raise ApiError(403, f"data source(s) {listed} not granted to you or to project {project!r}", "datasource")


async def check_alert_groups(
    db: asyncpg.Pool | asyncpg.Connection, who: Principal, used: Iterable[tuple[str, int | str]], project: str
) -> None:
    """A task's ``alert_group`` (id or name; ``used``: (field, value) pairs) must exist (400 at the field) and,
    for a general user, be granted to them or to the workflow's ``project`` (400 at the field), as data sources."""
    for field_name, value in used:
        by_id = isinstance(value, int)
        row = await db.fetchrow(f"SELECT id FROM alert_group WHERE {'id' if by_id else 'group_name'} = $1", value)
        if row is None:
            raise ApiError(400, f"no alert group {value!r}", field_name)
        if who.is_admin:
            continue
        granted = await db.fetchval(
            "SELECT EXISTS (SELECT 1 FROM resource_grant WHERE resource_type = 'alert_group' AND resource_id = $1"
            " AND (user_id = $2 OR project_code = (SELECT code FROM project WHERE name = $3)))",
            int(row["id"]),
            who.user_id,
            project,
        )
        if not granted:
            raise ApiError(400, f"alert group {value!r} is not granted to you or to project {project!r}", field_name)
