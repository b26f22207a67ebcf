"""Users, grants, login, tokens and the audit log, end to end on real processes (the api_cluster fixture:
master, worker and API server over PostgreSQL and etcd). The route-by-route matrix is tests/test_permissions.py;
here the handlers run for real: what lists show, what a task log or a start answers to whom."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from http.cookies import SimpleCookie
from typing import Any

import pytest

from engine.client import ApiClient
from tests.conftest import ApiCluster
from tests.test_api import claimed, error_of, shell_doc, wait_final

pytestmark = pytest.mark.slow


def _name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def make_user(c: ApiCluster, name: str, password: str = "correct horse", admin: bool = False) -> ApiClient:
    """A user made by the admin, and a client with a token the admin made for them."""
    c.client().post("/api/v1/users", {"name": name, "password": password, "admin": admin})
    token = c.client().post("/api/v1/tokens", {"name": "e2e", "user": name})
    assert token["user"] == name and token["expire_time"]
    return c.client(token["token"])


def _items(client: ApiClient, path: str, **query: Any) -> list[Any]:
    return list(client.get(path, size=500, **query)["items"])


def _run_as(c: ApiCluster, client: ApiClient, wf: str, project: str) -> tuple[int, int, int]:
    """The user's workflow in a project of their own (created by saving it), run once: code, instance, task a."""
    code = client.post("/api/v1/workflows", shell_doc(wf, project), release=True)["code"]
    instance = claimed(c, client.post(f"/api/v1/workflows/{code}/start", {})["command_id"])
    detail = wait_final(c, instance)
    assert detail["state"] == "SUCCESS"
    task = next(t["id"] for t in detail["tasks"] if t["name"] == "a")
    assert "hello from a" in "".join(client.get(f"/api/v1/tasks/{task}/log")["lines"])
    return code, instance, task


def test_a_general_user_sees_and_does_only_what_the_project_grants(api_cluster: ApiCluster) -> None:
    c = api_cluster
    alice, bob = _name("alice"), _name("bob")
    as_alice, as_bob = make_user(c, alice), make_user(c, bob)
    project, wf = _name("pa-"), _name("wf")
    code, instance, task = _run_as(c, as_alice, wf, project)
    assert as_alice.get(f"/api/v1/projects/{project}/grants")["owner"] == alice
    # the admin's data sources: one granted to alice's project, one to nobody
    shared, private = _name("ds_shared_"), _name("ds_private_")
    for name in (shared, private):
        c.client().put(f"/api/v1/datasources/{name}", {"params": {"host": "h", "password": "s3cret"}})
    c.client().post("/api/v1/grants", {"resource_type": "datasource", "resource": shared, "project": project})

    # bob, with no grant: nothing of it shows, and every direct look answers 404 like a missing thing
    assert project not in [p["name"] for p in _items(as_bob, "/api/v1/projects")]
    assert code not in [w["code"] for w in _items(as_bob, "/api/v1/workflows")]
    assert instance not in [i["id"] for i in _items(as_bob, "/api/v1/instances")]
    assert not {shared, private} & {d["name"] for d in _items(as_bob, "/api/v1/datasources")}
    for path in (f"/api/v1/workflows/{code}", f"/api/v1/instances/{instance}", f"/api/v1/tasks/{task}/log",
                 f"/api/v1/tasks/{task}", f"/api/v1/projects/{project}"):  # fmt: skip
        err = error_of(lambda p=path: as_bob.get(p))
        assert err.status == 404, path
    assert error_of(lambda: as_bob.post(f"/api/v1/workflows/{code}/start", {})).status == 404
    assert error_of(lambda: as_bob.get(f"/api/v1/workflows/{code + 10**9}")).status == 404
    # bob's own project is his; alice does not see it either
    as_bob.post("/api/v1/projects", {"name": project + "-bob"})
    assert project + "-bob" not in [p["name"] for p in _items(as_alice, "/api/v1/projects")]

    # READ: bob sees the workflow, its runs, logs and the project's data source; may not start or edit
    as_alice.put(f"/api/v1/projects/{project}/grants/{bob}", {"perms": ["READ"]})
    assert code in [w["code"] for w in _items(as_bob, "/api/v1/workflows", project=project)]
    assert instance in [i["id"] for i in _items(as_bob, "/api/v1/instances", project=project)]
    assert as_bob.get(f"/api/v1/tasks/{task}/log")["lines"]
    assert {d["name"] for d in _items(as_bob, "/api/v1/datasources")} & {shared, private} == {shared}
    assert error_of(lambda: as_bob.post(f"/api/v1/workflows/{code}/start", {})).status == 403
    assert error_of(lambda: as_bob.put(f"/api/v1/workflows/{code}", shell_doc(wf, project))).status == 403
    assert error_of(lambda: as_bob.post(f"/api/v1/instances/{instance}/rerun")).status == 403
    assert error_of(lambda: as_bob.put(f"/api/v1/projects/{project}/grants/{bob}", {"perms": ["WRITE"]})).status == 403
    assert error_of(lambda: as_bob.put(f"/api/v1/datasources/{shared}", {"params": {}})).status == 403

    # EXECUTE: bob starts it; still may not edit it
    as_alice.put(f"/api/v1/projects/{project}/grants/{bob}", {"perms": ["EXECUTE"]})
    again = claimed(c, as_bob.post(f"/api/v1/workflows/{code}/start", {})["command_id"])
    assert wait_final(c, again)["state"] == "SUCCESS"
    assert error_of(lambda: as_bob.put(f"/api/v1/workflows/{code}", shell_doc(wf, project))).status == 403

    # WRITE: bob saves a new version; revoking the grant hides everything again
    as_alice.put(f"/api/v1/projects/{project}/grants/{bob}", {"perms": ["WRITE"]})
    assert as_bob.put(f"/api/v1/workflows/{code}", shell_doc(wf, project, description="by bob"))["version"] == 2
    as_alice.delete(f"/api/v1/projects/{project}/grants/{bob}")
    assert error_of(lambda: as_bob.get(f"/api/v1/workflows/{code}")).status == 404

    # the admin sees all of it; the audit log has who did what
    assert code in [w["code"] for w in _items(c.client(), "/api/v1/workflows", project=project)]
    entries = _items(c.client(), "/api/v1/audit", user=bob)
    actions = {(e["action"], e["resource_type"], e["status"]) for e in entries}
    assert ("start", "workflows", 201) in actions and ("update", "workflows", 200) in actions
    assert ("start", "workflows", 403) in actions  # refused calls are recorded too
    grants = _items(c.client(), "/api/v1/audit", user=alice, action="grant")
    assert grants and all(e["address"] and e["time"] for e in grants)
    assert grants[0]["project_code"] is not None
    assert error_of(lambda: as_bob.get("/api/v1/audit")).status == 403


def _http(c: ApiCluster, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    req = urllib.request.Request(c.url + path, data=None if body is None else json.dumps(body).encode(), method=method)
    req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def test_login_session_csrf_logout_and_throttling(api_cluster: ApiCluster) -> None:
    c = api_cluster
    carol = _name("carol")
    make_user(c, carol, password="pa55word-carol")
    status, headers, body = _http(c, "POST", "/api/v1/login", {"user": carol, "password": "pa55word-carol"})
    assert status == 200 and body["user"] == carol and not body["admin"]
    cookie_header = headers["Set-Cookie"]
    assert "HttpOnly" in cookie_header and "SameSite=Strict" in cookie_header
    session = SimpleCookie(cookie_header)["porpoise_session"].value
    assert session not in json.dumps(body)
    csrf = body["csrf_token"]
    cookie = {"Cookie": f"porpoise_session={session}"}
    assert _http(c, "GET", "/api/v1/me", headers=cookie)[2]["name"] == carol
    # a change needs the CSRF token as well as the cookie
    status, _, err = _http(c, "POST", "/api/v1/projects", {"name": _name("pc-")}, headers=cookie)
    assert status == 403 and "X-CSRF-Token" in err["error"]["message"]
    assert (
        _http(c, "POST", "/api/v1/projects", {"name": _name("pc-")}, headers={**cookie, "X-CSRF-Token": csrf})[0] == 201
    )
    # the password changes; the old one no longer signs in; sessions end
    assert _http(c, "POST", "/api/v1/me/password", {"old_password": "wrong-one-x", "new_password": "n3w-password"},
                 headers={**cookie, "X-CSRF-Token": csrf})[0] == 403  # fmt: skip
    assert _http(c, "POST", "/api/v1/logout", headers={**cookie, "X-CSRF-Token": csrf})[0] == 200
    assert _http(c, "GET", "/api/v1/me", headers=cookie)[0] == 401

    # throttling: five failures for one user name, then 429 with Retry-After, even with the right password
    for _ in range(5):
        assert _http(c, "POST", "/api/v1/login", {"user": carol, "password": "nope-nope"})[0] == 401
    status, headers, err = _http(c, "POST", "/api/v1/login", {"user": carol, "password": "pa55word-carol"})
    assert status == 429 and int(headers["Retry-After"]) >= 1 and "too many" in err["error"]["message"]
    # an unknown user gets the same answer as a wrong password
    status, _, err = _http(c, "POST", "/api/v1/login", {"user": _name("ghost"), "password": "whatever1"})
    assert status == 401 and err["error"]["message"].startswith("wrong user name or password")
    logins = _items(c.client(), "/api/v1/audit", user=carol, action="login")
    assert {e["status"] for e in logins} >= {200, 401, 429}


def test_token_rules(api_cluster: ApiCluster) -> None:
    c = api_cluster
    dave, erin = _name("dave"), _name("erin")
    as_dave, as_erin = make_user(c, dave), make_user(c, erin)
    # a general user makes tokens for themself only, never never-expiring, never beyond their own rights
    assert error_of(lambda: as_dave.post("/api/v1/tokens", {"name": "x", "user": erin})).status == 403
    reduced = as_dave.post("/api/v1/tokens", {"name": "ro", "perms": ["READ"], "expires_in_days": 1})
    assert reduced["perms"] == ["READ"]
    # any right implies READ, as with grants
    assert as_dave.post("/api/v1/tokens", {"name": "x", "perms": ["EXECUTE"]})["perms"] == ["EXECUTE", "READ"]
    as_ro = c.client(reduced["token"])
    assert error_of(lambda: as_ro.post("/api/v1/tokens", {"name": "full"})).status == 403
    assert error_of(lambda: as_ro.post("/api/v1/tokens", {"name": "w", "perms": ["WRITE"]})).status == 403
    # a reduced token manages no tokens, not even weaker ones (tests/test_attacks.py has the rest of the rules)
    assert error_of(lambda: as_ro.post("/api/v1/tokens", {"name": "ro2", "perms": ["READ"]})).status == 403
    assert error_of(lambda: as_dave.post("/api/v1/tokens", {"name": "x", "expires_in_days": 10000})).status == 400
    # lists show one's own; revoking another's answers 404; the admin revokes anyone's
    listed = _items(as_dave, "/api/v1/tokens")
    assert next(t for t in listed if t["name"] == "e2e")["last_used_time"] is not None
    mine = {t["id"] for t in listed}
    theirs = {t["id"] for t in _items(as_erin, "/api/v1/tokens")}
    assert mine and theirs and not mine & theirs
    assert error_of(lambda: as_dave.delete(f"/api/v1/tokens/{min(theirs)}")).status == 404
    assert error_of(lambda: as_dave.get("/api/v1/tokens", user=erin)).status == 403
    c.client().delete(f"/api/v1/tokens/{min(theirs)}")
    assert error_of(lambda: as_erin.get("/api/v1/me")).status == 401
    # a disabled user's tokens stop working; enabled again, they work
    c.client().put(f"/api/v1/users/{dave}", {"enabled": False})
    assert error_of(lambda: as_dave.get("/api/v1/me")).status == 401
    c.client().put(f"/api/v1/users/{dave}", {"enabled": True})
    assert as_dave.get("/api/v1/me")["name"] == dave
    # users are the admins' business
    assert error_of(lambda: as_dave.get("/api/v1/users")).status == 403
    assert error_of(lambda: as_dave.post("/api/v1/users", {"name": _name("x"), "password": "12345678"})).status == 403
    err = error_of(lambda: c.client().post("/api/v1/users", {"name": _name("x"), "password": "short"}))
    assert err.status == 400 and err.field == "password"
    c.client().delete(f"/api/v1/users/{erin}")
    assert erin not in [u["name"] for u in _items(c.client(), "/api/v1/users")]


def test_a_workflow_may_use_only_data_sources_granted_to_its_user_or_project(api_cluster: ApiCluster) -> None:
    c = api_cluster
    gina = _name("gina")
    as_gina = make_user(c, gina)
    source, project = _name("ds_g_"), _name("pg-")
    c.client().put(f"/api/v1/datasources/{source}", {"params": {"host": "h", "password": "s3cret"}})
    doc = {"name": _name("wf"), "project": project,
           "tasks": [{"name": "q", "type": "SQL", "params": {"datasource": source, "sql": "select 1"}}]}  # fmt: skip
    err = error_of(lambda: as_gina.post("/api/v1/workflows", doc))
    assert err.status == 403 and source in str(err) and err.field == "datasource"
    assert project not in [p["name"] for p in _items(c.client(), "/api/v1/projects")]  # nothing was saved
    as_gina.post("/api/v1/projects", {"name": project})
    c.client().post("/api/v1/grants", {"resource_type": "datasource", "resource": source, "project": project})
    assert as_gina.post("/api/v1/workflows", doc)["created"]
    grants = _items(c.client(), "/api/v1/grants", resource_type="datasource")
    grant = next(g for g in grants if g["resource"] == source)
    c.client().delete(f"/api/v1/grants/{grant['id']}")
    assert (
        error_of(
            lambda: as_gina.put(
                f"/api/v1/workflows/{_items(as_gina, '/api/v1/workflows', project=project)[0]['code']}", doc
            )
        ).status
        == 403
    )


def test_a_workflow_may_start_or_watch_another_projects_workflow_only_with_the_right(api_cluster: ApiCluster) -> None:
    """SUB_PROCESS needs EXECUTE, DEPENDENT needs READ on the target's project (else WRITE on one project would
    run or reveal another's workflows)."""
    c = api_cluster
    hal, ivy = _name("hal"), _name("ivy")
    as_hal, as_ivy = make_user(c, hal), make_user(c, ivy)
    theirs, mine = _name("ph-"), _name("pi-")
    target = as_hal.post("/api/v1/workflows", shell_doc(_name("wf"), theirs), release=True)["code"]
    sub = {"name": _name("wf"), "project": mine,
           "tasks": [{"name": "child", "type": "SUB_PROCESS", "params": {"workflow_code": target}}]}  # fmt: skip
    dep = {"name": _name("wf"), "project": mine, "tasks": [{"name": "wait", "type": "DEPENDENT", "params": {
        "items": [{"workflow_code": target, "project": theirs, "cycle": "day", "date_value": "today"}]}}]}  # fmt: skip
    for doc in (sub, dep):
        err = error_of(lambda d=doc: as_ivy.post("/api/v1/workflows", d))
        assert err.status == 404 and err.field and err.field.startswith("tasks[0].params"), err
    as_hal.put(f"/api/v1/projects/{theirs}/grants/{ivy}", {"perms": ["READ"]})
    assert as_ivy.post("/api/v1/workflows", dep)["created"]
    err = error_of(lambda: as_ivy.post("/api/v1/workflows", sub))
    assert err.status == 403 and "EXECUTE" in str(err)
    as_hal.put(f"/api/v1/projects/{theirs}/grants/{ivy}", {"perms": ["EXECUTE"]})
    assert as_ivy.post("/api/v1/workflows", sub)["created"]


def test_the_overview_shows_a_granted_user_only_the_failures_of_projects_they_may_see(api_cluster: ApiCluster) -> None:
    c = api_cluster
    owner, reader = _name("owner"), _name("reader")
    as_owner, as_reader = make_user(c, owner), make_user(c, reader)
    mine = _name("ov-granted")
    as_owner.post("/api/v1/workflows", shell_doc(_name("wf"), mine), release=True)
    as_owner.put(f"/api/v1/projects/{mine}/grants/{reader}", {"perms": ["READ"]})  # the reader holds a grant
    hidden = _name("ov-hidden")  # the admin's project: the reader has no right on it
    doc = {"name": _name("boom"), "project": hidden,
           "tasks": [{"name": "a", "type": "SHELL", "params": {"rawScript": "exit 3"}}]}  # fmt: skip
    code = c.client().post("/api/v1/workflows", doc, release=True)["code"]
    failed = wait_final(c, claimed(c, c.client().post(f"/api/v1/workflows/{code}/start", {})["command_id"]))
    assert failed["state"] == "FAILURE"
    assert failed["id"] in [f["id"] for f in c.client().get("/api/v1/overview")["failures"]]
    seen = as_reader.get("/api/v1/overview")
    assert failed["id"] not in [f["id"] for f in seen["failures"]]
    assert failed["id"] not in [r["id"] for r in seen["running"]]
