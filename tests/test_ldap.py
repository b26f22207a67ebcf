"""LDAP sign-in against a real OpenLDAP server (tests/ldap_server.py) on loopback: search-then-bind over
StartTLS with a service account through a real API, users created at the first sign-in, admin rights and project
grants from directory groups, wrong passwords, disabled accounts, a local user of the same name, a directory
that stops answering (a clear 503 within the timeout while local users still sign in); bind-as-user and
filter injection through the directory client itself."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import pytest

from engine import config as config_mod
from engine.api.directory import Directory, DirectoryUnavailable
from tests.conftest import ApiCluster, launch_api_cluster
from tests.ldap_server import PEOPLE, SERVICE_DN, SERVICE_PASSWORD, SUFFIX, LdapServer, start_ldap
from tests.test_users_e2e import _http

pytestmark = pytest.mark.slow

PROJECT = "ldap-etl"


@pytest.fixture(scope="module")
def ldap(workdir: Path) -> Iterator[LdapServer]:
    server = start_ldap(workdir / "ldap")
    try:
        yield server
    finally:
        server.stop()


def _settings(server: LdapServer, **more: str) -> dict[str, str]:
    base = {
        "enabled": "true", "urls": f'["{server.url}"]', "start_tls": "true", "ca_file": str(server.ca_file),
        "bind_dn": SERVICE_DN, "bind_password": SERVICE_PASSWORD, "base_dn": f"ou=people,{SUFFIX}",
        "group_base_dn": f"ou=groups,{SUFFIX}", "admin_groups": '["porpoise-admins"]',
        "project_grants": f'["data-eng={PROJECT}:READ+EXECUTE+WRITE", "analysts={PROJECT}:READ"]', "timeout": "2",
    }  # fmt: skip
    return {**base, **more}


@pytest.fixture(scope="module")
def ldap_api(workdir: Path, pg_server: Any, etcd_server: Any, ldap: LdapServer) -> Iterator[ApiCluster]:
    env = {f"PORPOISE_LDAP_{k.upper()}": v for k, v in _settings(ldap).items()}
    # with a token cache, as deployed: a change of a user's rights must reach the tokens this API remembers
    cached = ("api.token_cache_seconds=600",)
    with launch_api_cluster(workdir, pg_server, etcd_server.endpoint, False, api_overrides=cached, **env) as cluster:
        cluster.client().post("/api/v1/projects", {"name": PROJECT})
        yield cluster


def _login(c: ApiCluster, user: str, password: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    status, headers, body = _http(c, "POST", "/api/v1/login", {"user": user, "password": password})
    cookie = {}
    if status == 200:
        cookie = {"Cookie": f"porpoise_session={SimpleCookie(headers['Set-Cookie'])['porpoise_session'].value}"}
    return status, body, cookie


def _perm(c: ApiCluster, user: str) -> int | None:
    rows = c.query(
        "SELECT pu.perm FROM project_user pu JOIN users u ON u.id = pu.user_id"
        " JOIN project p ON p.code = pu.project_code WHERE u.user_name = $1 AND p.name = $2",
        user,
        PROJECT,
    )
    return int(rows[0][0]) if rows else None


def test_directory_users_sign_in_with_rights_from_their_groups(ldap_api: ApiCluster) -> None:
    c = ldap_api
    status, body, cookie = _login(c, "ada", PEOPLE["ada"][0])
    assert status == 200 and body["user"] == "ada" and body["admin"] is True
    _, _, me = _http(c, "GET", "/api/v1/me", headers=cookie)
    assert me["name"] == "ada" and me["email"] == "ada@example.org" and me["auth_source"] == "ldap"
    assert _perm(c, "ada") == 7  # data-eng: READ + EXECUTE + WRITE

    status, body, cookie = _login(c, "bob", PEOPLE["bob"][0])
    assert status == 200 and body["admin"] is False and _perm(c, "bob") == 2  # analysts: READ
    assert _http(c, "GET", "/api/v1/users", headers=cookie)[0] == 403  # not an admin
    # a directory user changes the password in the directory, not here
    status, _, err = _http(c, "POST", "/api/v1/me/password",
                           {"old_password": PEOPLE["bob"][0], "new_password": "another-pw-123"},
                           headers={**cookie, "X-CSRF-Token": body["csrf_token"]})  # fmt: skip
    assert status == 400 and "LDAP" in err["error"]["message"]

    status, body, _ = _login(c, "carol", PEOPLE["carol"][0])
    assert status == 200 and body["admin"] is False and _perm(c, "carol") is None  # no group, no grant


def test_a_sign_in_that_takes_admin_rights_away_ends_them_for_the_users_tokens_at_once(ldap_api: ApiCluster) -> None:
    """The directory decides the admin right at each sign-in. When it takes the right away, the user's API
    tokens lose it on this server at once, not when the token cache expires."""
    c = ldap_api
    assert _login(c, "carol", PEOPLE["carol"][0])[1]["admin"] is False  # in no admin group
    c.client().put("/api/v1/users/carol", {"admin": True})  # made an admin here meanwhile
    token = c.client().post("/api/v1/tokens", {"name": "carol-admin", "user": "carol"})["token"]
    bearer = {"Authorization": f"Bearer {token}"}
    assert _http(c, "GET", "/api/v1/users", headers=bearer)[0] == 200  # an admin's call: the token is cached
    assert _login(c, "carol", PEOPLE["carol"][0])[1]["admin"] is False  # the directory takes the right away
    status, _, body = _http(c, "GET", "/api/v1/users", headers=bearer)
    assert status == 403, body


def test_wrong_passwords_unknown_users_and_filter_injection_are_refused(ldap_api: ApiCluster) -> None:
    c = ldap_api
    for user, password in [("ada", "not-her-password"), ("nobody", "whatever-123"), ("ada)(uid=*", "x-123456"),
                           ("*", PEOPLE["ada"][0]), ("ada", "")]:  # fmt: skip
        status, body, _ = _login(c, user, password)
        assert status in (400, 401), (user, status, body)
    assert not c.query("SELECT 1 FROM users WHERE user_name IN ('nobody', '*', 'ada)(uid=*')")


def test_a_disabled_account_and_a_local_user_of_the_same_name(ldap_api: ApiCluster) -> None:
    c = ldap_api
    assert _login(c, "dave", PEOPLE["dave"][0])[0] == 200
    c.client().put("/api/v1/users/dave", {"enabled": False})
    status, body, _ = _login(c, "dave", PEOPLE["dave"][0])
    assert status == 401 and "disabled" in body["error"]["message"]
    # a local user is never checked against the directory, even where the directory has the same name
    c.client().post("/api/v1/users", {"name": "localeve", "password": "local-Pw-12345"})
    assert _login(c, "localeve", "local-Pw-12345")[0] == 200
    local = c.query("SELECT auth_source FROM users WHERE user_name = 'localeve'")
    assert local[0][0] == "local"


def test_a_directory_that_stops_answering_gets_a_clear_error_and_local_users_still_sign_in(
    ldap_api: ApiCluster, ldap: LdapServer
) -> None:
    c = ldap_api
    c.client().post("/api/v1/users", {"name": "localadmin", "password": "local-admin-Pw-1", "admin": True})
    ldap.pause()
    try:
        status, body, _ = _login(c, "ada", PEOPLE["ada"][0])
        assert status == 503 and "directory is unavailable" in body["error"]["message"]
        status, body, _ = _login(c, "localadmin", "local-admin-Pw-1")
        assert status == 200 and body["admin"] is True
    finally:
        ldap.resume()
    assert _login(c, "ada", PEOPLE["ada"][0])[0] == 200


def _directory(server: LdapServer, **more: str) -> Directory:
    overrides = [f"ldap.{k}={v}" for k, v in _settings(server, **more).items()]
    return Directory(config_mod.load(None, overrides, environ={}).ldap)


def test_bind_as_the_user_without_a_service_account(ldap: LdapServer) -> None:
    directory = _directory(ldap, bind_dn="", bind_password="", user_dn_template=f"uid={{user}},ou=people,{SUFFIX}")
    found = asyncio.run(directory.authenticate("bob", PEOPLE["bob"][0]))
    assert found is not None and found.dn == f"uid=bob,ou=people,{SUFFIX}"
    assert found.email == "bob@example.org" and found.groups == {"analysts"}
    assert asyncio.run(directory.authenticate("bob", "wrong-password")) is None
    # the login name is escaped in the DN: it cannot name another entry
    assert asyncio.run(directory.authenticate("bob,ou=people", PEOPLE["bob"][0])) is None


def test_a_wrong_service_account_or_no_server_is_unavailable_not_a_wrong_password(ldap: LdapServer) -> None:
    with pytest.raises(DirectoryUnavailable, match="service account refused"):
        asyncio.run(_directory(ldap, bind_password="wrong").authenticate("ada", PEOPLE["ada"][0]))
    with pytest.raises(DirectoryUnavailable, match="unavailable"):
        asyncio.run(_directory(ldap, urls='["ldap://127.0.0.1:9"]').authenticate("ada", PEOPLE["ada"][0]))


def test_bad_ldap_settings_are_refused_naming_the_key() -> None:
    for overrides, key in [
        (["ldap.enabled=true", "ldap.urls=[http://x]", "ldap.base_dn=dc=x"], "ldap.urls"),
        (["ldap.enabled=true"], "ldap"),
        (["ldap.enabled=true", "ldap.base_dn=dc=x", "ldap.project_grants=[nogrant]"], "ldap.project_grants"),
        (["ldap.enabled=true", "ldap.user_dn_template=cn=x"], "ldap.user_dn_template"),
    ]:
        with pytest.raises(config_mod.ConfigError, match=key):
            config_mod.load(None, overrides, environ={})


def test_a_directory_user_cannot_sign_in_under_a_name_that_looks_like_another(ldap_api: ApiCluster) -> None:
    """The directory compares names without case or outer spaces: "Carol" or "carol " passes its check for
    the entry carol. Neither becomes a second user looking like carol (or like the local admin)."""
    c = ldap_api
    assert _login(c, "carol", PEOPLE["carol"][0])[0] == 200
    for name in ("Carol", "CAROL", "carol ", " carol"):
        status, body, _ = _login(c, name, PEOPLE["carol"][0])
        assert status == 401, (name, status, body)
    assert [r[0] for r in c.query("SELECT user_name FROM users WHERE lower(btrim(user_name)) = 'carol'")] == ["carol"]
