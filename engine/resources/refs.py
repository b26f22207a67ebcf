"""Which resource-center files a task uses, read from its parameters the DolphinScheduler way, and how a saved
workflow version pins them.

A task names files in three places (docs/RESOURCES.md):

- ``resourceList``: every task type; a list of ``{"resourceName": "etl/clean.py"}`` (3.2+), ``{"id": 12}``
  (3.1: a resource id, here the id of one stored version), ``{"fullName": "/etl/clean.py", "res": ...}``
  (3.1 legacy) or a plain string;
- SPARK ``mainJar`` / ``mainFile`` and MR ``mainJar`` given as an object ``{"resourceName": ...}``.

A name is the file's path in its project's resource center (``etl/clean.py``). A DolphinScheduler storage
path is cut to the part after its ``resources/`` directory (``/dolphinscheduler/t1/resources/etl/a.jar``
-> ``etl/a.jar``), and a leading ``/`` dropped; but a ``mainJar`` / ``mainFile`` that is an absolute path
without such a directory names a file on the worker (as a plain string always does) and is not fetched.

An entry may carry ``"version": N`` (that version) or ``"version": "latest"`` (whatever is newest when the
task runs). Saving a workflow version pins every entry without one to the newest version then stored
(:func:`pin`), so a run of that workflow version always gets the same bytes.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import InvalidInput
from engine.workflows.model import DefinitionError

LATEST = "latest"
MAX_NAME = 512
#: fields naming one file as an object, by task type
MAIN_FIELDS = {"SPARK": ("mainJar", "mainFile"), "MR": ("mainJar",)}
_SEGMENT = re.compile(r"^[^/\\\x00-\x1f\x7f]{1,255}$")


class ResourceNameError(InvalidInput):
    """A resource path is not usable; the message says why."""


def check_name(name: str) -> str:
    """A resource path as stored: relative, ``/``-separated, no empty, ``.`` or ``..`` segment, at most
    512 characters; ResourceNameError otherwise."""
    if not isinstance(name, str) or not name:
        raise ResourceNameError("a resource path is required (e.g. etl/clean.py)")
    if len(name) > MAX_NAME:
        raise ResourceNameError(f"a resource path has at most {MAX_NAME} characters")
    if name.startswith("/"):
        raise ResourceNameError("a resource path is relative to the project's resource center (no leading /)")
    for part in name.split("/"):
        if part in ("", ".", "..") or not _SEGMENT.match(part):
            raise ResourceNameError(
                f"bad resource path {name!r}: segments must be non-empty names without \\, control"
                " characters, '.' or '..'"
            )
    return name


def from_storage_path(raw: str) -> str:
    """A DolphinScheduler storage path or full name -> a resource path (the part after ``resources/``)."""
    text = raw.strip()
    marker = "/resources/"
    if marker in text:
        text = text.split(marker, 1)[1]
    elif "://" in text:
        text = text.split("://", 1)[1].split("/", 1)[-1]
    return text.lstrip("/")


@dataclass(frozen=True)
class Ref:
    """One file a task uses: its path, the version (None: the latest when the task runs) and where it was
    named (``resourceList[0]``, ``mainJar``)."""

    name: str
    version: int | None
    field: str
    #: a 3.1 ``{"id": n}`` entry not yet resolved to a name
    resource_id: int | None = None


def _version(entry: Mapping[str, Any], field: str) -> int | str | None:
    value = entry.get("version")
    if value is None:
        return ""
    if value == LATEST:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise DefinitionError(f"{field}.version", f"give a version number (>= 1) or {LATEST!r}, got {value!r}")


def _entry_ref(entry: Any, field: str, main: bool) -> Ref | None:
    """The reference an entry makes; None for a worker path (``main`` fields only) or an empty entry."""
    if isinstance(entry, str):
        if main:
            return None  # a plain string main file is a path on the worker
        entry = {"resourceName": entry}
    if not isinstance(entry, Mapping):
        raise DefinitionError(field, 'a resource is {"resourceName": "path"} or {"id": n}')
    version = _version(entry, field)
    raw = entry.get("resourceName") or entry.get("fullName") or entry.get("res")
    if isinstance(raw, str) and raw.strip():
        if main and raw.startswith("/") and "/resources/" not in raw:
            return None  # an absolute path on the worker
        name = from_storage_path(raw)
        try:
            check_name(name)
        except ResourceNameError as exc:
            raise DefinitionError(field, str(exc)) from None
        return Ref(name, version if isinstance(version, int) else None, field)
    rid = entry.get("id")
    if isinstance(rid, int) and not isinstance(rid, bool) and rid > 0:
        return Ref("", None, field, resource_id=rid)
    if main:
        return None
    raise DefinitionError(field, 'a resource is {"resourceName": "path"} or {"id": n}')


def wants_latest(entry: Any) -> bool:
    return isinstance(entry, Mapping) and entry.get("version") == LATEST


def references(task_type: str, params: Mapping[str, Any]) -> list[Ref]:
    """Every file a task's parameters name, in order; DefinitionError at the field for a malformed entry."""
    out: list[Ref] = []
    listed = params.get("resourceList")
    if listed is not None:
        if not isinstance(listed, list):
            raise DefinitionError("resourceList", "must be a list of resources")
        for i, entry in enumerate(listed):
            ref = _entry_ref(entry, f"resourceList[{i}]", main=False)
            if ref is not None:
                out.append(ref)
    for name in MAIN_FIELDS.get(task_type, ()):
        value = params.get(name)
        if isinstance(value, Mapping):
            ref = _entry_ref(value, name, main=True)
            if ref is not None:
                out.append(ref)
    return out


#: (project code, name) -> the newest version number, or None when there is no such file
Latest = Callable[[str], Awaitable[int | None]]
#: resource version id -> (name, version), or None
ById = Callable[[int], Awaitable[tuple[str, int] | None]]


async def pin(
    task_type: str, params: Mapping[str, Any], latest: Latest, by_id: ById, missing_ok: bool = False
) -> tuple[dict[str, Any], list[Ref]]:
    """``params`` with every resource entry's name normalised and, unless it says ``latest``, its version
    pinned to the newest stored; and the references. A file not in the resource center is a
    DefinitionError at its field (with ``missing_ok``: kept as a ``latest`` reference, to be uploaded)."""
    out = copy.deepcopy(dict(params))
    refs: list[Ref] = []

    async def resolve(entry: Any, field: str, main: bool) -> Any:
        ref = _entry_ref(entry, field, main)
        if ref is None:
            return entry
        fixed = dict(entry) if isinstance(entry, Mapping) else {}
        name, version = ref.name, ref.version
        if ref.resource_id is not None:
            found = await by_id(ref.resource_id)
            if found is None:
                if not missing_ok:
                    raise DefinitionError(field, f"no resource with id {ref.resource_id} in this project")
                return entry
            name, version = found
            fixed.pop("id", None)
        elif version is None and not wants_latest(entry):
            version = await latest(name)
            if version is None:
                if not missing_ok:
                    raise DefinitionError(field, f"resource {name!r} is not in the project's resource center")
                fixed["version"] = LATEST
        for legacy in ("fullName", "res"):
            fixed.pop(legacy, None)
        fixed["resourceName"] = name
        if version is not None:
            fixed["version"] = version
        refs.append(Ref(name, version, field))
        return fixed

    listed = out.get("resourceList")
    if isinstance(listed, list):
        out["resourceList"] = [await resolve(e, f"resourceList[{i}]", False) for i, e in enumerate(listed)]
    elif listed is not None:
        raise DefinitionError("resourceList", "must be a list of resources")
    for name in MAIN_FIELDS.get(task_type, ()):
        if isinstance(out.get(name), Mapping):
            out[name] = await resolve(out[name], name, True)
    return out, refs
