"""Reading and controlling runs over the REST API: :class:`Client`, :class:`Instance`, :class:`TaskRun`.

The client finds the API as the ``porpoise`` command does (arguments, then ``PORPOISE_URL`` /
``PORPOISE_TOKEN``, then a client file such as ``.run/standalone/client.json``) and speaks plain HTTP:
no gateway process. Errors from the API raise :class:`ApiError` with its status and field.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote

from engine.cli.client import ApiClient, ApiClientError, discover

ApiError = ApiClientError

#: workflow states after which nothing more happens to a run (unless it is resumed or rerun)
FINISHED = frozenset({"SUCCESS", "FAILURE", "STOP", "PAUSE", "BLOCK"})
#: seconds the API may take to claim a start command before start() gives up
CLAIM_WAIT_SECONDS = 30.0


class Client:
    """A connection to one Porpoise API (``url`` and ``token``, or found as the CLI finds them)."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        api: ApiClient | None = None,
        ca_file: str | None = None,
    ) -> None:
        """``ca_file``: the CA that signed an https:// API's certificate (default: ``PORPOISE_CA_FILE``, the
        client file's, else the system's trusted CAs); the certificate is always verified."""
        self.api = api or ApiClient(discover(url, token, ca_file), timeout=timeout)

    # -- definitions -------------------------------------------------------------------------------

    def workflow_code(self, name: str, project: str | None = None) -> int:
        found = self.api.get("/api/v1/workflows", name=name, project=project)["items"]
        if not found:
            raise ApiError(f"no workflow named {name!r}" + (f" in project {project!r}" if project else ""), 404)
        if len(found) > 1:
            raise ApiError(f"workflow {name!r} exists in several projects; pass project=", 409)
        return int(found[0]["code"])

    def workflow(self, name_or_code: str | int, project: str | None = None) -> dict[str, Any]:
        """A workflow with its current document."""
        code = name_or_code if isinstance(name_or_code, int) else self.workflow_code(name_or_code, project)
        return dict(self.api.get(f"/api/v1/workflows/{code}"))

    # -- data sources ------------------------------------------------------------------------------

    def datasources(self) -> list[dict[str, Any]]:
        """Every data source the caller may see (secrets shown as ``***``)."""
        return list(self.api.get("/api/v1/datasources", size=500)["items"])

    def put_datasource(
        self, name: str, type: str | None = None, note: str | None = None, **params: Any
    ) -> dict[str, Any]:
        """Create or edit data source ``name``: ``type`` (POSTGRESQL, MYSQL, CLICKHOUSE, HIVE; kept on edit)
        and its params (host, port, database, user, password, dsn, other). A ``password`` of ``"***"`` (or
        none, on an edit) keeps the stored one."""
        params.setdefault("password", "***")
        body: dict[str, Any] = {"params": params}
        if type is not None:
            body["type"] = type
        if note is not None:
            body["note"] = note
        return dict(self.api.put(f"/api/v1/datasources/{name}", body))

    def edit_datasource(self, name: str, note: str | None = None, **changes: Any) -> dict[str, Any]:
        """Change some params of data source ``name``, keeping the others (and the stored password unless
        ``password`` is given)."""
        current = next((d for d in self.datasources() if d["name"] == name), None)
        if current is None:
            raise ApiError(f"no data source named {name!r}", 404)
        return self.put_datasource(name, current["type"], note, **{**current["params"], **changes})

    def test_datasource(self, name: str, timeout: int | None = None) -> dict[str, Any]:
        """Connect to data source ``name`` and run SELECT 1: ``{ok, version}`` or ``{ok: False, error}`` with
        the server's message."""
        return dict(self.api.post(f"/api/v1/datasources/{name}/test", {"timeout": timeout} if timeout else {}))

    def delete_datasource(self, name: str) -> dict[str, Any]:
        return dict(self.api.delete(f"/api/v1/datasources/{name}"))

    # -- project parameters ------------------------------------------------------------------------

    def project_params(self, project: str) -> dict[str, str]:
        """Project ``project``'s parameters, name -> value (secret values shown as ``***``)."""
        items = self.api.get(f"/api/v1/projects/{quote(project, safe='')}/parameters", size=500)["items"]
        return {p["name"]: p["value"] for p in items}

    def set_project_param(self, project: str, name: str, value: str, secret: bool | None = None) -> dict[str, Any]:
        """Create or change a project parameter; ``secret``: sealed at rest, shown as ``***`` and masked in task
        logs (None: kept as it is on an edit, not secret when new). A secret's value ``"***"`` keeps the stored one."""
        body: dict[str, Any] = {"value": value, **({"secret": secret} if secret is not None else {})}
        path = f"/api/v1/projects/{quote(project, safe='')}/parameters/{quote(name, safe='')}"
        return dict(self.api.put(path, body))

    def delete_project_param(self, project: str, name: str) -> dict[str, Any]:
        return dict(self.api.delete(f"/api/v1/projects/{quote(project, safe='')}/parameters/{quote(name, safe='')}"))

    # -- resource center ---------------------------------------------------------------------------

    def _resources(self, project: str) -> str:
        return f"/api/v1/projects/{quote(project, safe='')}/resources"

    def upload_resource(
        self, project: str, path: str, source: str | Path | BinaryIO, size: int | None = None
    ) -> dict[str, Any]:
        """A new version of resource ``path`` from a local file (or an open binary file of ``size`` bytes),
        streamed: any size in bounded memory."""
        if isinstance(source, str | Path):
            with open(source, "rb") as fh:
                return self.upload_resource(project, path, fh, os.fstat(fh.fileno()).st_size)
        if size is None:
            raise ValueError("give size with an open file")
        return dict(self.api.upload(self._resources(project), source, size, {"path": path}))

    def download_resource(self, project: str, path: str, sink: BinaryIO, version: int | None = None) -> str:
        """Write a resource's content (newest version, or ``version``) to ``sink``; its version."""
        headers = self.api.download(f"{self._resources(project)}/content", sink, {"path": path, "version": version})
        return headers.get("X-Resource-Version", "")

    def resources(self, project: str, folder: str = "") -> dict[str, Any]:
        """A folder's sub-folders and files (newest version of each)."""
        return dict(self.api.get(self._resources(project), folder=folder or None))

    def resource_versions(self, project: str, path: str) -> list[dict[str, Any]]:
        return list(self.api.request("GET", f"{self._resources(project)}/versions", query={"path": path})["versions"])

    def restore_resource(self, project: str, path: str, version: int) -> dict[str, Any]:
        return dict(self.api.post(f"{self._resources(project)}/restore", {"path": path, "version": version}))

    def delete_resource(self, project: str, path: str) -> dict[str, Any]:
        return dict(self.api.request("DELETE", self._resources(project), query={"path": path}))

    # -- worker groups -----------------------------------------------------------------------------

    def worker_groups(self) -> list[dict[str, Any]]:
        """Worker groups with their assigned (``addresses``) and live (``live``) workers."""
        return list(self.api.get("/api/v1/worker-groups", size=500)["items"])

    def create_worker_group(
        self, name: str, addresses: Sequence[str], description: str | None = None
    ) -> dict[str, Any]:
        """Create a worker group of registered workers, by address (admins)."""
        body: dict[str, Any] = {"name": name, "addresses": list(addresses)}
        if description is not None:
            body["description"] = description
        return dict(self.api.post("/api/v1/worker-groups", body))

    def set_worker_group(self, name: str, addresses: Sequence[str]) -> dict[str, Any]:
        """Make ``addresses`` the workers of group ``name`` (admins); masters pick it up without a restart."""
        return dict(self.api.patch(f"/api/v1/worker-groups/{quote(name, safe='')}", {"addresses": list(addresses)}))

    def delete_worker_group(self, name: str) -> dict[str, Any]:
        return dict(self.api.delete(f"/api/v1/worker-groups/{quote(name, safe='')}"))

    # -- environments ------------------------------------------------------------------------------

    def environments(self) -> list[dict[str, Any]]:
        """The environments the caller may use (name, config, worker_groups, projects)."""
        return list(self.api.get("/api/v1/environments", size=500)["items"])

    def create_environment(
        self, name: str, config: str, description: str | None = None, worker_groups: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Create an environment (admins): ``config`` holds shell lines such as ``export JAVA_HOME=...``."""
        body: dict[str, Any] = {"name": name, "config": config, "worker_groups": list(worker_groups)}
        if description is not None:
            body["description"] = description
        return dict(self.api.post("/api/v1/environments", body))

    def edit_environment(self, name: str, **changes: Any) -> dict[str, Any]:
        """Change an environment's ``config``, ``description`` or ``worker_groups`` (admins)."""
        return dict(self.api.patch(f"/api/v1/environments/{quote(name, safe='')}", changes))

    def delete_environment(self, name: str) -> dict[str, Any]:
        return dict(self.api.delete(f"/api/v1/environments/{quote(name, safe='')}"))

    def grant_environment(self, name: str, project: str | None = None, user: str | None = None) -> dict[str, Any]:
        """Let a project's workflows (or a user's) name environment ``name`` (admins)."""
        body: dict[str, Any] = {"resource_type": "environment", "resource": name}
        body.update({"project": project} if project is not None else {"user": user})
        return dict(self.api.post("/api/v1/grants", body))

    def set_schedule(self, code: int, crontab: str, timezone: str = "UTC", online: bool = True) -> dict[str, Any]:
        """Create the workflow's schedule, or change its first one; online or offline as asked."""
        existing = self.api.get("/api/v1/schedules", workflow=code, size=1)["items"]
        body = {"crontab": crontab, "timezone": timezone, "online": online}
        if existing:
            return dict(self.api.put(f"/api/v1/schedules/{existing[0]['id']}", body))
        return dict(self.api.post("/api/v1/schedules", {"workflow_code": code, **body}))

    # -- runs --------------------------------------------------------------------------------------

    def start(
        self, workflow: str | int, params: Mapping[str, Any] | None = None, project: str | None = None, **options: Any
    ) -> Instance:
        """Start a workflow (name or code); returns its instance once a master has claimed the command."""
        code = workflow if isinstance(workflow, int) else self.workflow_code(workflow, project)
        body: dict[str, Any] = {"params": {k: str(v) for k, v in (params or {}).items()}, **options}
        command = self.api.post(f"/api/v1/workflows/{code}/start", body)
        return self.instance(self._claimed(command))

    def _claimed(self, command: Mapping[str, Any]) -> int:
        """The instance a queued command became, once a master has claimed it."""
        deadline = time.monotonic() + CLAIM_WAIT_SECONDS
        status = command if "status" in command else self.api.get(f"/api/v1/commands/{command['command_id']}")
        while status["status"] == "QUEUED":
            if time.monotonic() >= deadline:
                raise TimeoutError(f"command {command['command_id']} still queued: is a master running?")
            time.sleep(0.05)
            status = self.api.get(f"/api/v1/commands/{command['command_id']}")
        if status["status"] == "ERROR":
            raise ApiError(f"command {command['command_id']} was refused: {status['message']}", 400)
        return int(status["workflow_instance_id"])

    def instance(self, instance_id: int) -> Instance:
        return Instance(self, instance_id)

    def instances(
        self, workflow: str | int | None = None, state: str | None = None, project: str | None = None, size: int = 50
    ) -> list[Instance]:
        """The newest runs, optionally of one workflow and / or in given states (comma list)."""
        code = None
        if workflow is not None:
            code = workflow if isinstance(workflow, int) else self.workflow_code(workflow, project)
        items = self.api.get("/api/v1/instances", workflow=code, state=state, project=project, size=size)["items"]
        return [Instance(self, int(i["id"]), i) for i in items]


class Instance:
    """One workflow run. Attributes read the last fetched state; :meth:`refresh` fetches again."""

    def __init__(self, client: Client, instance_id: int, data: Mapping[str, Any] | None = None) -> None:
        self.client = client
        self.id = instance_id
        self.data: dict[str, Any] = dict(data) if data is not None else {}
        if data is None:
            self.refresh()

    def __repr__(self) -> str:
        return f"Instance({self.id}, {self.state})"

    def refresh(self) -> Instance:
        self.data = dict(self.client.api.get(f"/api/v1/instances/{self.id}"))
        return self

    @property
    def state(self) -> str:
        return str(self.data.get("state", ""))

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    @property
    def succeeded(self) -> bool:
        return self.state == "SUCCESS"

    @property
    def tasks(self) -> list[TaskRun]:
        """The current attempt of each task that has started (fetched with the instance)."""
        if "tasks" not in self.data:
            self.refresh()
        return [TaskRun(self.client, t) for t in self.data.get("tasks", [])]

    def task(self, name: str) -> TaskRun:
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(f"instance {self.id} has no task {name!r} (yet)")

    def wait(self, timeout: float | None = None, interval: float = 0.3) -> Instance:
        """Block until the run has finished; raises TimeoutError after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.refresh().finished:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"instance {self.id} still {self.state} after {timeout}s")
            time.sleep(interval)
        return self

    def _control(self, action: str) -> dict[str, Any]:
        """Stop and pause are sent to the owning master; resume, recover-failed and rerun queue a command,
        and return once a master has taken it (so a following :meth:`wait` sees the new run)."""
        reply = dict(self.client.api.post(f"/api/v1/instances/{self.id}/{action}"))
        if reply.get("command_id") is not None:
            self.client._claimed(reply)
            self.refresh()
        return reply

    def stop(self) -> dict[str, Any]:
        return self._control("stop")

    def pause(self) -> dict[str, Any]:
        return self._control("pause")

    def resume(self) -> dict[str, Any]:
        return self._control("resume")

    def recover_failed(self) -> dict[str, Any]:
        return self._control("recover-failed")

    def rerun(self) -> dict[str, Any]:
        return self._control("rerun")


@dataclass
class TaskRun:
    """One attempt of a task, as the API reports it."""

    client: Client
    data: dict[str, Any]

    @property
    def id(self) -> int:
        return int(self.data["id"])

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def state(self) -> str:
        return str(self.data["state"])

    def log_lines(self, follow: bool = False, interval: float = 0.3) -> Iterator[str]:
        """The task's log, line by line, paged from the worker that ran it; ``follow`` waits for more
        until the task has finished writing."""
        skip = 0
        while True:
            page = self.client.api.get(f"/api/v1/tasks/{self.id}/log", skip=skip, limit=1000)
            yield from page["lines"]
            skip = page["next"]
            if page["lines"]:
                continue
            if page["complete"] or not follow:
                return
            time.sleep(interval)

    def log(self) -> str:
        """The whole log as it is now."""
        return "\n".join(self.log_lines())

    def force_success(self) -> dict[str, Any]:
        return dict(self.client.api.post(f"/api/v1/tasks/{self.id}/force-success"))
