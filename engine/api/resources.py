"""The resource center's routes (docs/RESOURCES.md): a project's versioned files.

Files are named by their path in the project (``?path=etl/clean.py``); folders are the paths' directories.
Readers of the project list, download and see versions and references; writers upload, restore and delete.
Uploads stream the request body to the blob store (engine/storage/blobs.py): either the raw body
(``Content-Type: application/octet-stream``) or a multipart form whose ``file`` part is the content (the
path then defaults to ``folder`` + the part's file name). Downloads stream the stored content back.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from aiohttp import BodyPartReader, web

from core import logs
from engine.api import access
from engine.api.projects import project_by_name
from engine.api.routing import ApiError, Call, Param, Route
from engine.api.tasks import attachment
from engine.resources import catalog
from engine.resources.refs import ResourceNameError, check_name
from engine.storage.blobs import BlobError

log = logs.get(__name__)

UPLOAD_CHUNK = 1 << 20
FIELD_BYTES = 4096
TAG = "resources"

_PATH = Param("path", str, "the file's path in the project's resource center, e.g. etl/clean.py")
_VERSION = Param("version", int, "a version number (default: the newest)", minimum=1, maximum=2**31 - 1)
_VERSION_ITEM = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "path": {"type": "string"},
        "version": {"type": "integer"},
        "size": {"type": "integer"},
        "sha256": {"type": "string"},
        "description": {"type": ["string", "null"]},
        "restored_from": {"type": ["integer", "null"], "description": "the version a restore copied"},
        "user_id": {"type": ["integer", "null"]},
        "create_time": {"type": "string", "format": "date-time"},
    },
}
_LISTING = {
    "type": "object",
    "properties": {
        "folder": {"type": "string"},
        "folders": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "path": {"type": "string"},
                    "files": {"type": "integer"},
                    "size": {"type": "integer"},
                },
            },
        },
        "files": {
            "type": "array",
            "items": {
                **_VERSION_ITEM,
                "properties": {
                    **_VERSION_ITEM["properties"],
                    "name": {"type": "string"},
                    "versions": {"type": "integer"},
                },
            },
        },
        "usage": {"type": "integer", "description": "bytes the project's files take"},
        "limit": {"type": "integer", "description": "bytes they may take (storage.max_project_bytes)"},
        "max_file_bytes": {"type": "integer"},
    },
}
_USERS = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "references": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "workflow": {"type": "string"},
                    "code": {"type": "integer"},
                    "workflow_version": {"type": "integer"},
                    "task": {"type": ["string", "null"]},
                    "path": {"type": "string"},
                    "version": {"type": ["integer", "string"], "description": "a number, or latest"},
                },
            },
        },
    },
}
_RESTORE = {
    "type": "object",
    "required": ["path", "version"],
    "additionalProperties": False,
    "properties": {
        "path": {"type": "string", "minLength": 1, "maxLength": 512},
        "version": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
    },
}


def _name(raw: str | None, field: str = "query.path") -> str:
    if not raw:
        raise ApiError(400, "give the file's path (e.g. ?path=etl/clean.py)", field)
    try:
        return check_name(raw)
    except ResourceNameError as exc:
        raise ApiError(400, str(exc), field) from None


def _folder(raw: str | None) -> str:
    folder = (raw or "").strip("/")
    if folder:
        try:
            check_name(folder)
        except ResourceNameError as exc:
            raise ApiError(400, str(exc), "query.folder") from None
    return folder


async def _project_code(api: Any, call: Call) -> int:
    return int((await project_by_name(api.db, call.path["name"]))["code"])


async def list_folder(api: Any, call: Call) -> dict[str, Any]:
    code = await _project_code(api, call)
    answer = await catalog.listing(api.db, code, _folder(call.query["folder"]))
    answer["usage"] = await catalog.usage(api.db, code)
    answer["limit"] = api.cfg.storage.max_project_bytes
    answer["max_file_bytes"] = api.cfg.storage.max_file_bytes
    return answer


#: uploads being stored, per API server: each may hold a database connection for its whole transfer
_UPLOADS: weakref.WeakKeyDictionary[Any, asyncio.Semaphore] = weakref.WeakKeyDictionary()


async def _within(read: Awaitable[bytes], idle: float) -> bytes:
    """The next piece of an upload, or 408 when the client sent nothing for ``idle`` seconds (a stalled or
    trickling upload must not hold its store connection for ever)."""
    try:
        return await asyncio.wait_for(read, idle)
    except TimeoutError:
        raise ApiError(408, f"the upload sent nothing for {idle:g} s and was abandoned (nothing stored)") from None


async def _body_chunks(request: web.Request, idle: float) -> AsyncIterator[bytes]:
    while chunk := await _within(request.content.read(UPLOAD_CHUNK), idle):
        yield chunk


async def _part_chunks(part: BodyPartReader, idle: float) -> AsyncIterator[bytes]:
    while chunk := await _within(part.read_chunk(UPLOAD_CHUNK), idle):
        yield chunk


async def _field(part: BodyPartReader) -> str:
    """A short text field of the form (at most FIELD_BYTES: it is read whole)."""
    data = bytearray()
    while chunk := await part.read_chunk(FIELD_BYTES):
        data += chunk
        if len(data) > FIELD_BYTES:
            raise ApiError(400, f"at most {FIELD_BYTES} bytes", f"body.{part.name}")
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise ApiError(400, "must be UTF-8 text", f"body.{part.name}") from None


async def upload(api: Any, call: Call) -> dict[str, Any]:
    """A new version of a file, the request body streamed to the store."""
    code = await _project_code(api, call)
    request = call.request
    path = call.query["path"]
    description = call.query["description"] or None
    idle = api.cfg.storage.upload_idle_timeout
    if request.content_type.startswith("multipart/"):
        reader = await request.multipart()
        while True:
            part = await reader.next()
            if part is None:
                raise ApiError(400, "the form has no file part (name it 'file')", "body.file")
            if not isinstance(part, BodyPartReader):
                raise ApiError(400, "nested multipart forms are not supported", "body")
            if part.name == "path" and not path:
                path = (await _field(part)).strip()
            elif part.name == "description" and not description:
                description = (await _field(part)).strip() or None
            elif part.name == "file":
                if not path:
                    folder = _folder(call.query["folder"])
                    filename = (part.filename or "").rsplit("/", 1)[-1]
                    path = f"{folder}/{filename}" if folder and filename else filename
                name = _name(path)
                return await _store(api, call, code, name, _part_chunks(part, idle), description)
            else:
                await part.release()
    return await _store(api, call, code, _name(path), _body_chunks(request, idle), description)


async def _store(
    api: Any, call: Call, code: int, name: str, chunks: AsyncIterator[bytes], description: str | None
) -> dict[str, Any]:
    if description is not None and len(description) > 1024:
        raise ApiError(400, "at most 1024 characters", "query.description")
    slots = _UPLOADS.setdefault(api, asyncio.Semaphore(api.cfg.storage.max_concurrent_uploads))
    if slots.locked():
        raise ApiError(503, "too many uploads at once on this API server; try again shortly", retry_after=5)
    try:
        async with slots:
            version = await catalog.upload(
                api.db, api.blobs, api.cfg.storage, code, name, chunks, call.user_id, description
            )
    except catalog.LimitExceeded as exc:
        raise ApiError(413, str(exc), "body") from None
    except BlobError as exc:
        log.warning("resource upload failed", path=name, error=str(exc))
        raise ApiError(503, f"the file store failed: {exc}") from None
    return version.public()


async def download(api: Any, call: Call) -> web.StreamResponse:
    code = await _project_code(api, call)
    name = _name(call.query["path"])
    found = await catalog.version_of(api.db, code, name, call.query["version"])
    if found is None:
        what = f"version {call.query['version']} of " if call.query["version"] else ""
        raise ApiError(404, f"{what}resource {name!r} does not exist")
    out = web.StreamResponse(
        headers={
            "Content-Disposition": attachment(name.rsplit("/", 1)[-1]),
            "X-Resource-Version": str(found.version),
            "X-Resource-Sha256": found.sha256,
        }
    )
    out.content_type = "application/octet-stream"
    out.content_length = found.size
    chunks = api.blobs.open(found.blob_key)
    try:
        async for chunk in chunks:
            if not out.prepared:
                await out.prepare(call.request)
            await out.write(chunk)
        if not out.prepared:
            await out.prepare(call.request)
    except BlobError as exc:
        if not out.prepared:
            raise ApiError(503, f"the file store failed: {exc}") from None
        # the answer has begun: its status cannot change; the client sees a short body (Content-Length)
        log.warning("resource download cut off", path=name, error=str(exc))
    await out.write_eof()
    return out


async def list_versions(api: Any, call: Call) -> dict[str, Any]:
    code = await _project_code(api, call)
    name = _name(call.query["path"])
    found = await catalog.versions(api.db, code, name)
    if not found:
        raise ApiError(404, f"resource {name!r} does not exist")
    return {"path": name, "versions": [v.public() for v in found]}


async def restore(api: Any, call: Call) -> dict[str, Any]:
    code = await _project_code(api, call)
    name = _name(call.body["path"], "path")
    try:
        version = await catalog.restore(api.db, api.cfg.storage, code, name, call.body["version"], call.user_id)
    except catalog.LimitExceeded as exc:
        raise ApiError(413, str(exc), "version") from None
    except catalog.ResourceError as exc:
        raise ApiError(404, str(exc), "version") from None
    return version.public()


async def references(api: Any, call: Call) -> dict[str, Any]:
    code = await _project_code(api, call)
    name = _name(call.query["path"])
    folder = await catalog.latest(api.db, code, name) is None
    return {"path": name, "references": await catalog.users(api.db, code, name, folder=folder)}


async def delete(api: Any, call: Call) -> dict[str, Any]:
    code = await _project_code(api, call)
    name = _name(call.query["path"])
    try:
        return await catalog.delete(api.db, api.blobs, code, name)
    except catalog.InUse as exc:
        raise ApiError(409, str(exc), "query.path", details=exc.users) from None
    except catalog.ResourceError as exc:
        raise ApiError(404, str(exc), "query.path") from None


_BASE = "/api/v1/projects/{name}/resources"
_READ = access.read("project", "path.name")
_WRITE = access.write("project", "path.name")
_DELETED = {
    "type": "object",
    "properties": {"deleted": {"type": "array", "items": {"type": "string"}}, "versions": {"type": "integer"}},
}

ROUTES = [
    Route("GET", _BASE, list_folder, "A folder of the project's resource center: sub-folders and files", TAG,
          query=(Param("folder", str, "the folder's path (default: the top)"),), response=_LISTING, rule=_READ),
    Route("POST", _BASE, upload, "Upload a file (a new version of its path): raw body or multipart 'file'", TAG,
          query=(Param("path", str, "the file's path (multipart: default folder + the file's name)"),
                 Param("folder", str, "multipart without path: the folder the file goes to"),
                 Param("description", str, "a note kept with the version")),
          consumes="application/octet-stream", response=_VERSION_ITEM, status=201, rule=_WRITE),
    Route("DELETE", _BASE, delete, "Delete a file (every version) or a folder; refused while workflows use it",
          TAG, query=(_PATH,), response=_DELETED, rule=_WRITE),
    Route("GET", f"{_BASE}/content", download, "Download a file (the newest version, or ?version=N)", TAG,
          query=(_PATH, _VERSION), produces="application/octet-stream", response={"type": "string",
                                                                                 "format": "binary"},
          rule=_READ),
    Route("GET", f"{_BASE}/versions", list_versions, "A file's versions, newest first", TAG, query=(_PATH,),
          response={"type": "object", "properties": {"path": {"type": "string"},
                                                     "versions": {"type": "array", "items": _VERSION_ITEM}}},
          rule=_READ),
    Route("POST", f"{_BASE}/restore", restore, "Restore a version: a new version equal to it", TAG,
          body=_RESTORE, response=_VERSION_ITEM, status=201, rule=_WRITE),
    Route("GET", f"{_BASE}/references", references, "The workflow versions whose tasks use a file or folder",
          TAG, query=(_PATH,), response=_USERS, rule=_READ),
]  # fmt: skip
