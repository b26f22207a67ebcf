"""Start parameters cannot rewrite a task's code (issue 24 item 4): a start sets only declared globals and
never a built-in, and a value reaches SHELL and PYTHON scripts and SQL as data. Real API, master, worker."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.conftest import ApiCluster
from tests.test_api import error_of, start, wait_final

pytestmark = pytest.mark.slow
PROJECT = "param-injection-tests"
#: the review's attack: close the quote, run a command, reopen it
ATTACK = '20260101"; id; echo "'
#: values that are shell or Python syntax; each must come out as the characters it is
HOSTILE = ['"; id; echo "', "$(id)", "`id`", "'; id; echo '", "\\\"); import os; os.system('id'); print((\""]


def _create(c: ApiCluster, tasks: list[dict[str, Any]], params: dict[str, str]) -> int:
    doc = {"name": f"inj_{uuid.uuid4().hex[:8]}", "project": PROJECT, "tasks": tasks, "params": params}
    return int(c.client().post("/api/v1/workflows", doc, release="true")["code"])


def _log(c: ApiCluster, detail: dict[str, Any], task: str) -> str:
    (entry,) = [t for t in detail["tasks"] if t["name"] == task]
    return str(c.client().get(f"/api/v1/tasks/{entry['id']}/log/download"))


def test_a_start_sets_only_declared_globals_and_never_a_built_in(api_cluster: ApiCluster) -> None:
    c = api_cluster
    code = _create(c, [{"name": "t", "type": "SHELL", "params": {"rawScript": "echo ${system.biz.date}"}}], {"v": "1"})
    client = c.client()
    err = error_of(lambda: client.post(f"/api/v1/workflows/{code}/start", {"params": {"system.biz.date": ATTACK}}))
    assert (err.status, err.field) == (400, "params.system.biz.date") and "built-in" in str(err), err
    err = error_of(lambda: client.post(f"/api/v1/workflows/{code}/start", {"params": {"other": "1"}}))
    assert (err.status, err.field) == (400, "params.other") and "not a global parameter" in str(err), err
    when = {"start": "2026-01-01T00:00:00", "end": "2026-01-01T00:00:00", "params": {"system.datetime": "x"}}
    err = error_of(lambda: client.post(f"/api/v1/workflows/{code}/backfill", when))
    assert (err.status, err.field) == (400, "params.system.datetime"), err
    # nor can a definition declare one
    doc = {"name": f"inj_{uuid.uuid4().hex[:8]}", "project": PROJECT, "params": {"system.biz.date": "1"},
           "tasks": [{"name": "t", "type": "SHELL", "params": {"rawScript": "true"}}]}  # fmt: skip
    err = error_of(lambda: client.post("/api/v1/workflows", doc))
    assert err.status == 400 and "built-in" in str(err), err
    detail = wait_final(c, start(c, code, {"params": {"v": "2"}}))
    assert detail["state"] == "SUCCESS", detail


def test_a_declared_global_s_value_is_data_in_shell_and_python_scripts(api_cluster: ApiCluster) -> None:
    c = api_cluster
    shell = "\n".join(
        [
            'echo "dq:${v}:"',
            "echo 'sq:${v}:'",
            "echo un:${v}:",
            "cat <<EOF\nhd:${v}:\nEOF",
            'printf "%s\\n" "$(echo "cs:${v}:")"',
        ]
    )
    tasks = [
        {"name": "sh", "type": "SHELL", "params": {"rawScript": shell}},
        {"name": "py", "type": "PYTHON", "params": {"rawScript": "print('py1:${v}:')\nprint(\"py2:${v}:\")"}},
    ]
    code = _create(c, tasks, {"v": "plain"})
    for value in HOSTILE:
        detail = wait_final(c, start(c, code, {"params": {"v": value}}))
        assert detail["state"] == "SUCCESS", (value, detail)
        sh, py = _log(c, detail, "sh"), _log(c, detail, "py")
        assert "uid=" not in sh + py, (value, sh, py)  # id never ran
        for line in (f"dq:{value}:", f"sq:{value}:", f"hd:{value}:", f"cs:{value}:"):
            assert line in sh, (value, line, sh)
        assert f"un:{value}:" in sh or value.startswith('"'), (value, sh)  # unquoted: split into words, never run
        assert f"py1:{value}:" in py and f"py2:{value}:" in py, (value, py)


def test_a_value_bound_into_sql_is_stored_as_data(api_cluster: ApiCluster) -> None:
    c = api_cluster
    url = urlsplit(c.dsn)
    source = f"inj_{uuid.uuid4().hex[:8]}"
    params = {"host": url.hostname, "port": url.port, "user": url.username, "password": url.password or "",
              "database": url.path.lstrip("/")}  # fmt: skip
    c.client().request("PUT", f"/api/v1/datasources/{source}", {"params": params})
    sql = {
        "datasource": source,
        "preStatements": ["CREATE TEMP TABLE notes (v text, n int)", "INSERT INTO notes VALUES ('${v}', ${n})"],
        "sql": "SELECT v AS stored, n FROM !{table} WHERE v = '${v}' AND n = ${n}",
        "localParams": [{"prop": "stored", "direct": "OUT"}],
    }
    code = _create(c, [{"name": "q", "type": "SQL", "params": sql}], {"v": "plain", "n": "1", "table": "notes"})
    # !{table} is raw text: only the value the workflow declares, never a start's
    raw = {"params": {"table": "notes; DROP TABLE notes"}}
    err = error_of(lambda: c.client().post(f"/api/v1/workflows/{code}/start", raw))
    assert (err.status, err.field) == (400, "params.table") and "raw SQL text" in str(err), err
    value = "'); DROP TABLE notes; --"
    detail = wait_final(c, start(c, code, {"params": {"v": value, "n": "7"}}))
    assert detail["state"] == "SUCCESS", (detail, _log(c, detail, "q"))
    log = _log(c, detail, "q")
    assert "query returned 1 row(s)" in log and f"{value}\t7" in log, log
    c.client().request("DELETE", f"/api/v1/datasources/{source}")
