"""The resource center end to end on real processes (api_cluster: master, worker, API over PostgreSQL and etcd):
files uploaded through the CLI and the SDK reach a SHELL task (runs a script) and a PYTHON task (imports a
module) in their working directories; a workflow version keeps the file versions it was saved with; a
corrupted content fails the task before it starts; the CLI lists, downloads, shows versions and refuses to
delete a file in use, with one-line errors."""

from __future__ import annotations

import io
import uuid
from pathlib import Path
from typing import Any

import pytest

from porpoise.client import Client
from tests.conftest import ApiCluster
from tests.test_api import start, wait_final
from tests.test_cli import porpoise

pytestmark = pytest.mark.slow


def _name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def _log(c: ApiCluster, detail: dict[str, Any], task: str) -> list[str]:
    tid = next(t["id"] for t in detail["tasks"] if t["name"] == task)
    return [line.rstrip("\n") for line in c.client().get(f"/api/v1/tasks/{tid}/log")["lines"]]


def _doc(name: str, project: str) -> dict[str, Any]:
    return {
        "name": name,
        "project": project,
        "tasks": [
            {"name": "sh", "type": "SHELL",
             "params": {"rawScript": "bash etl/run.sh", "resourceList": [{"resourceName": "etl/run.sh"}]}},
            {"name": "py", "type": "PYTHON",
             "params": {"rawScript": "from lib.greet import MESSAGE\nprint('module says', MESSAGE)",
                        "resourceList": [{"resourceName": "lib/greet.py"}]}},
        ],
    }  # fmt: skip


def _upload_script(c: ApiCluster, tmp_path: Path, project: str, text: str) -> None:
    local = tmp_path / "run.sh"
    local.write_text(text)
    done = porpoise(c, "resource", "upload", project, str(local), "--path", "etl/run.sh")
    assert done.returncode == 0, done.stderr
    assert "uploaded etl/run.sh version" in done.stdout


def test_tasks_get_the_pinned_versions_of_their_files(api_cluster: ApiCluster, tmp_path: Path) -> None:
    c = api_cluster
    admin = c.client()
    sdk = Client(api=admin)
    project = _name("res-")
    admin.post("/api/v1/projects", {"name": project})
    _upload_script(c, tmp_path, project, "echo script says v1\n")
    module = b"MESSAGE = 'v1'\n"
    assert sdk.upload_resource(project, "lib/greet.py", io.BytesIO(module), len(module))["version"] == 1
    workflow = _name("wf")
    saved = admin.post("/api/v1/workflows", _doc(workflow, project), release=True)
    detail = wait_final(c, start(c, saved["code"]))
    assert detail["state"] == "SUCCESS", detail
    assert "script says v1" in _log(c, detail, "sh")
    assert "module says v1" in _log(c, detail, "py")
    assert any("resource etl/run.sh version 1" in line for line in _log(c, detail, "sh"))

    # new versions of both files: the saved workflow version still gets the old ones
    _upload_script(c, tmp_path, project, "echo script says v2\n")
    sdk.upload_resource(project, "lib/greet.py", io.BytesIO(b"MESSAGE = 'v2'\n"), 15)
    detail = wait_final(c, start(c, saved["code"]))
    assert detail["state"] == "SUCCESS", detail
    assert "script says v1" in _log(c, detail, "sh") and "module says v1" in _log(c, detail, "py")
    # the next version of the workflow pins the new files
    assert admin.put(f"/api/v1/workflows/{saved['code']}", _doc(workflow, project))["version"] == 2
    detail = wait_final(c, start(c, saved["code"]))
    assert "script says v2" in _log(c, detail, "sh") and "module says v2" in _log(c, detail, "py")

    # the CLI: list, versions, download of an old version, delete refused while in use
    listed = porpoise(c, "resource", "list", project)
    assert listed.returncode == 0 and "etl/  (1 files" in listed.stdout and "lib/  (1 files" in listed.stdout
    versions = porpoise(c, "resource", "versions", project, "etl/run.sh")
    assert versions.returncode == 0 and versions.stdout.splitlines()[0].startswith("v2")
    target = tmp_path / "old.sh"
    got = porpoise(c, "resource", "download", project, "etl/run.sh", "--version", "1", "-o", str(target))
    assert got.returncode == 0, got.stderr
    assert target.read_text() == "echo script says v1\n"
    refused = porpoise(c, "resource", "delete", project, "etl/run.sh")
    assert refused.returncode == 1 and "is used by workflow(s)" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    missing = porpoise(c, "resource", "download", project, "nope.txt", "-o", str(tmp_path / "x"))
    assert missing.returncode == 1 and "does not exist" in missing.stderr and not (tmp_path / "x").exists()
    bad = porpoise(c, "resource", "upload", project, str(tmp_path / "absent.sh"))
    assert bad.returncode == 1 and "cannot read" in bad.stderr and "Traceback" not in bad.stderr
    # the SDK: versions, restore, download
    assert [v["version"] for v in sdk.resource_versions(project, "lib/greet.py")] == [2, 1]
    assert sdk.restore_resource(project, "lib/greet.py", 1)["version"] == 3
    sink = io.BytesIO()
    assert sdk.download_resource(project, "lib/greet.py", sink) == "3"
    assert sink.getvalue() == module
    assert [f["name"] for f in sdk.resources(project, "lib")["files"]] == ["greet.py"]


def test_a_corrupted_file_fails_the_task_before_it_starts(api_cluster: ApiCluster, tmp_path: Path) -> None:
    c = api_cluster
    admin = c.client()
    project = _name("res-")
    admin.post("/api/v1/projects", {"name": project})
    script = b"touch started\necho ran\n"
    Client(api=admin).upload_resource(project, "bad.sh", io.BytesIO(script), len(script))
    task = {"name": "t", "type": "SHELL", "params": {"rawScript": "bash bad.sh", "resourceList": ["bad.sh"]}}
    doc = {"name": _name("wf"), "project": project, "tasks": [task]}
    code = admin.post("/api/v1/workflows", doc, release=True)["code"]
    (row,) = c.query(
        "SELECT r.blob_key FROM resource r JOIN project p ON p.code = r.project_code WHERE p.name = $1", project
    )
    c.query(
        "UPDATE blob_chunk SET data = $2 WHERE blob_id = (SELECT id FROM blob WHERE key = $1)",
        row["blob_key"],
        b"echo tampered\n",
    )
    detail = wait_final(c, start(c, code))
    assert detail["state"] == "FAILURE", detail
    lines = _log(c, detail, "t")
    assert any("not started" in line and "checksum mismatch" in line for line in lines), lines
    assert not any(line == "ran" or "tampered" in line for line in lines), lines
