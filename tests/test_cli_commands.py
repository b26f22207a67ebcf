"""Every command the ``porpoise`` parser defines runs in a test.

The walker reads the parser itself (sub-commands and the ``action`` choices of commands that take one),
so a command added without a test fails here; each entry names the test that runs it (against a real
API, or real processes for the local commands) and the words of its argument list that the test's source
must contain. The commands no other test ran are run below, against a real API.
"""

from __future__ import annotations

import argparse
import ast
import json
import uuid
from pathlib import Path

import pytest

from engine.cli.main import _parser
from tests.conftest import ApiCluster
from tests.helpers import ROOT
from tests.test_cli import porpoise, workflow_file
from tests.test_cli_users import porpoise as porpoise_with_stdin

TESTS = ROOT / "tests"

#: command words -> (the test, or the helper a test calls, that runs it; the literal argument words it passes,
#: in order)
COVERAGE: dict[tuple[str, ...], tuple[str, tuple[str, ...]]] = {
    ("standalone",): ("test_launchers.py::start_standalone_banner", ("standalone", "--run-dir")),
    ("apply",): ("test_cli.py::test_apply_start_watch_list_status_logs", ("apply",)),
    ("start",): ("test_cli.py::test_apply_start_watch_list_status_logs", ("start",)),
    ("list",): ("test_cli.py::test_apply_start_watch_list_status_logs", ("list",)),
    ("status",): ("test_cli.py::test_apply_start_watch_list_status_logs", ("status",)),
    ("watch",): ("test_cli.py::test_watch_exit_code_reflects_failure", ("watch",)),
    ("logs",): ("test_cli.py::test_apply_start_watch_list_status_logs", ("logs",)),
    ("stop",): ("test_cli.py::test_follow_logs_stop_and_resume", ("stop",)),
    ("pause",): ("test_cli_commands.py::test_the_commands_no_other_test_runs", ("pause",)),
    ("resume",): ("test_cli.py::test_follow_logs_stop_and_resume", ("resume",)),
    ("recover-failed",): ("test_cli.py::test_scheduling_and_control_commands", ("recover-failed",)),
    ("rerun",): ("test_cli.py::test_scheduling_and_control_commands", ("rerun",)),
    ("worker", "drain"): (
        "test_worker_stop.py::test_porpoise_worker_drain_lets_the_running_task_finish_and_sends_new_work_elsewhere",
        ("worker", "drain"),
    ),
    ("worker", "undrain"): (
        "test_worker_stop.py::test_porpoise_worker_drain_lets_the_running_task_finish_and_sends_new_work_elsewhere",
        ("worker", "undrain"),
    ),
    ("backfill",): ("test_cli.py::test_scheduling_and_control_commands", ("backfill",)),
    ("force-success",): ("test_cli.py::test_scheduling_and_control_commands", ("force-success",)),
    ("import",): (
        "test_migrate_e2e.py::test_cli_import_refuses_unsupported_types_then_skips_them",
        ("import", "dolphinscheduler"),
    ),
    ("export",): ("test_migrate_e2e.py::test_import_export_import_round_trip", ("export",)),
    ("user", "create"): ("test_cli_users.py::test_user_and_token_commands", ("user", "create")),
    ("user", "list"): ("test_cli_users.py::test_user_and_token_commands", ("user", "list")),
    ("user", "disable"): ("test_cli_users.py::test_user_and_token_commands", ("user", "disable")),
    ("user", "enable"): ("test_cli_users.py::test_user_and_token_commands", ("user", "enable")),
    ("user", "delete"): ("test_cli_commands.py::test_the_commands_no_other_test_runs", ("user", "delete")),
    ("user", "passwd"): ("test_cli_users.py::test_user_and_token_commands", ("user", "passwd")),
    ("token", "create"): ("test_cli_users.py::test_user_and_token_commands", ("token", "create")),
    ("token", "list"): ("test_cli_users.py::test_user_and_token_commands", ("token", "list")),
    ("token", "revoke"): ("test_cli_users.py::test_user_and_token_commands", ("token", "revoke")),
    ("tenant", "create"): ("test_tenants_e2e.py::test_the_tenant_cli", ("create",)),
    ("tenant", "list"): ("test_tenants_e2e.py::test_the_tenant_cli", ("tenant", "list")),
    ("tenant", "delete"): ("test_tenants_e2e.py::test_the_tenant_cli", ("tenant", "delete")),
    ("tenant", "grant"): ("test_tenants_e2e.py::test_the_tenant_cli", ("grant",)),
    ("tenant", "revoke"): ("test_tenants_e2e.py::test_the_tenant_cli", ("revoke",)),
    ("environment", "create"): ("test_environments_e2e.py::test_the_environment_cli_and_sdk", ("create",)),
    ("environment", "update"): ("test_environments_e2e.py::test_the_environment_cli_and_sdk", ("update",)),
    ("environment", "list"): (
        "test_environments_e2e.py::test_the_environment_cli_and_sdk",
        (
            "environment",
            "list",
        ),
    ),
    ("environment", "delete"): ("test_environments_e2e.py::test_the_environment_cli_and_sdk", ("delete",)),
    ("environment", "grant"): ("test_environments_e2e.py::test_the_environment_cli_and_sdk", ("grant",)),
    ("environment", "revoke"): ("test_environments_e2e.py::test_the_environment_cli_and_sdk", ("revoke",)),
    ("worker-group", "create"): ("test_worker_groups_e2e.py::test_the_worker_group_cli_and_sdk", ("create",)),
    ("worker-group", "update"): ("test_worker_groups_e2e.py::test_the_worker_group_cli_and_sdk", ("update",)),
    ("worker-group", "list"): (
        "test_worker_groups_e2e.py::test_the_worker_group_cli_and_sdk",
        ("worker-group", "list"),
    ),
    ("worker-group", "delete"): ("test_worker_groups_e2e.py::test_the_worker_group_cli_and_sdk", ("delete",)),
    ("project-param", "list"): ("test_project_params_e2e.py::test_the_project_param_cli_and_sdk", ("list",)),
    ("project-param", "set"): ("test_project_params_e2e.py::test_the_project_param_cli_and_sdk", ("set",)),
    ("project-param", "delete"): ("test_project_params_e2e.py::test_the_project_param_cli_and_sdk", ("delete",)),
    ("resource", "upload"): (
        "test_resources_e2e.py::_upload_script",
        ("resource", "upload", "--path"),
    ),
    ("resource", "list"): ("test_resources_e2e.py::test_tasks_get_the_pinned_versions_of_their_files", ("list",)),
    ("resource", "download"): (
        "test_resources_e2e.py::test_tasks_get_the_pinned_versions_of_their_files",
        ("download", "etl/run.sh", "--version"),
    ),
    ("resource", "versions"): (
        "test_resources_e2e.py::test_tasks_get_the_pinned_versions_of_their_files",
        ("versions",),
    ),
    ("resource", "delete"): ("test_resources_e2e.py::test_tasks_get_the_pinned_versions_of_their_files", ("delete",)),
    ("secrets", "init"): ("test_cli_commands.py::test_the_commands_no_other_test_runs", ("secrets", "init")),
    ("secrets", "encrypt-all"): (
        "test_cli_commands.py::test_the_commands_no_other_test_runs",
        ("secrets", "encrypt-all"),
    ),
    ("secrets", "rotate-key"): (
        "test_secrets.py::test_a_password_data_source_is_sealed_masked_runs_and_survives_a_key_rotation",
        ("rotate-key",),
    ),
    ("secrets", "prune-keys"): (
        "test_secrets.py::test_a_password_data_source_is_sealed_masked_runs_and_survives_a_key_rotation",
        ("prune-keys",),
    ),
    ("cluster",): ("test_cli.py::test_cluster_and_friendly_errors", ("cluster",)),
    ("cluster", "start"): ("test_launchers.py::test_cluster_start_status_stop", ("cluster", "start")),
    ("cluster", "stop"): ("test_launchers.py::test_cluster_start_status_stop", ("cluster", "stop")),
    ("cluster", "status"): ("test_launchers.py::test_cluster_start_status_stop", ("cluster", "status")),
    ("db", "init"): ("test_migrations.py::test_db_commands_and_the_first_admin", ("db", "init")),
    ("db", "upgrade"): (
        "test_migrations.py::test_db_commands_and_the_first_admin",
        ("db", "upgrade"),
    ),
    ("db", "version"): (
        "test_migrations.py::test_db_commands_and_the_first_admin",
        ("db", "version"),
    ),
}
for _action in ("list", "show", "create", "update", "delete", "online", "offline", "preview"):
    _test = "test_cli.py::test_scheduling_and_control_commands"
    if _action in ("update", "online", "offline"):
        _test = "test_cli_commands.py::test_the_commands_no_other_test_runs"
    COVERAGE[("schedule", _action)] = (_test, ("schedule", _action))
for _action in ("list", "put", "test", "delete"):
    COVERAGE[("datasource", _action)] = (
        "test_datasource_types.py::test_cli_and_sdk_put_and_test_a_clickhouse_source",
        ("datasource", _action),
    )
for _action in ("list", "show", "delete", "test", "alerts"):
    COVERAGE[("alert-group", _action)] = (
        "test_alert_channels.py::test_edit_a_group_keep_its_secrets_and_send_a_test_alert",
        ("alert-group", _action),
    )
for _action in ("list", "show", "create", "resize", "delete", "queue", "force-start"):
    COVERAGE[("task-group", _action)] = (
        "test_cli_commands.py::test_the_commands_no_other_test_runs",
        ("task-group", _action),
    )


def commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every command the parser accepts, as its words: sub-commands, and the choices of an ``action``."""
    found: set[tuple[str, ...]] = set()
    nested = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            nested = True
            for name, child in action.choices.items():
                found |= commands(child, (*prefix, name))
            if not action.required:
                found.add(prefix)
        elif action.dest == "action" and action.choices and not action.option_strings:
            nested = True
            found |= {(*prefix, str(choice)) for choice in action.choices}
    if not nested:
        found.add(prefix)
    return found


def _literals_of(reference: str) -> list[str]:
    """The string literals of one test function's body, in source order."""
    file, name = reference.split("::")
    tree = ast.parse((TESTS / file).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    raise AssertionError(f"{reference}: no such test")


def _contains_run(literals: list[str], words: tuple[str, ...]) -> bool:
    return any(tuple(literals[i : i + len(words)]) == words for i in range(len(literals)))


def test_every_command_of_the_parser_is_run_by_a_named_test() -> None:
    defined = commands(_parser())
    assert defined, "the walker found no command"
    assert ("task-group", "queue") in defined and ("db", "init") in defined and ("cluster",) in defined
    missing = sorted(defined - COVERAGE.keys())
    assert not missing, f"commands without a test (add one, then an entry in COVERAGE): {missing}"
    stale = sorted(COVERAGE.keys() - defined)
    assert not stale, f"COVERAGE names commands the parser does not define: {stale}"
    for words, (reference, evidence) in sorted(COVERAGE.items()):
        assert _contains_run(_literals_of(reference), evidence), (
            f"{' '.join(words)}: {reference} never passes {evidence}"
        )


def test_the_walker_sees_a_command_without_a_test() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("one")
    two = sub.add_parser("two").add_subparsers(dest="verb", required=True)
    two.add_parser("a")
    sub.add_parser("three").add_argument("action", choices=["x", "y"])
    assert commands(parser) == {("one",), ("two", "a"), ("three", "x"), ("three", "y")}
    assert not _contains_run(["two", "b"], ("two", "a")) and _contains_run(["-q", "two", "a"], ("two", "a"))


PAUSABLE = """\
tasks:
  - name: slow
    type: SHELL
    params: {rawScript: "sleep 30"}
  - name: after
    type: SHELL
    upstream: [slow]
    params: {rawScript: "echo after"}
"""


def _ok(run: object) -> str:
    out = run  # subprocess.CompletedProcess
    assert out.returncode == 0, out.stdout + out.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in out.stderr  # type: ignore[attr-defined]
    return out.stdout  # type: ignore[attr-defined]


def _refused(run: object, words: str) -> None:
    assert run.returncode == 1, run.stdout + run.stderr  # type: ignore[attr-defined]
    assert words in run.stderr and "Traceback" not in run.stderr, run.stderr  # type: ignore[attr-defined]


@pytest.mark.slow
def test_the_commands_no_other_test_runs(api_cluster: ApiCluster, tmp_path: Path) -> None:
    c = api_cluster
    name = f"cli_{uuid.uuid4().hex[:8]}"
    _ok(porpoise(c, "apply", str(workflow_file(tmp_path, name, PAUSABLE))))

    # pause: the running task finishes, nothing after it is submitted
    instance = json.loads(_ok(porpoise(c, "start", name, "--json")))["workflow_instance_id"]
    _ok(porpoise(c, "pause", str(instance)))
    detail = c.client().get(f"/api/v1/instances/{instance}")
    assert detail["state"] in ("READY_PAUSE", "PAUSE"), detail["state"]
    _ok(porpoise(c, "stop", str(instance)))

    # schedules: update, online, offline
    made = json.loads(_ok(porpoise(c, "schedule", "create", name, "--cron", "0 0 3 * * ?", "--json")))
    sid = str(made["id"])
    _ok(porpoise(c, "schedule", "update", sid, "--cron", "0 30 4 * * ?", "--timezone", "Asia/Shanghai"))
    shown = c.client().get(f"/api/v1/schedules/{made['id']}")
    assert shown["crontab"] == "0 30 4 * * ?" and shown["timezone"] == "Asia/Shanghai"
    _ok(porpoise(c, "schedule", "online", sid))
    assert c.client().get(f"/api/v1/schedules/{made['id']}")["release_state"] == "ONLINE"
    _ok(porpoise(c, "schedule", "offline", sid))
    assert c.client().get(f"/api/v1/schedules/{made['id']}")["release_state"] == "OFFLINE"
    _refused(porpoise(c, "schedule", "update", "abc", "--cron", "* * * * *"), "")
    _ok(porpoise(c, "schedule", "delete", sid))

    # task groups: every action, and the clear refusals
    group = f"tg_{uuid.uuid4().hex[:8]}"
    created = json.loads(_ok(porpoise(c, "task-group", "create", group, "--size", "2", "--json")))
    gid = str(created["id"])
    assert group in _ok(porpoise(c, "task-group", "list"))
    assert json.loads(_ok(porpoise(c, "task-group", "show", gid, "--json")))["size"] == 2
    _ok(porpoise(c, "task-group", "resize", gid, "--size", "3"))
    assert c.client().get(f"/api/v1/task-groups/{gid}")["size"] == 3
    queue = json.loads(_ok(porpoise(c, "task-group", "queue", gid, "--json")))
    assert queue["items"] == [] if isinstance(queue, dict) else queue == []
    _refused(porpoise(c, "task-group", "force-start", "987654321"), "")
    _refused(porpoise(c, "task-group", "show", "x"), "must be a number")
    _refused(porpoise(c, "task-group", "create", f"{group}_2"), "--size is required")
    _ok(porpoise(c, "task-group", "delete", gid))
    assert group not in _ok(porpoise(c, "task-group", "list"))

    # user delete
    user = f"u_{uuid.uuid4().hex[:8]}"
    _ok(porpoise_with_stdin(c, "user", "create", user, "--password-stdin", stdin="a-long-password-1\n"))
    _ok(porpoise(c, "user", "delete", user))
    assert user not in _ok(porpoise(c, "user", "list"))

    # secrets init / encrypt-all (as the operator, on the database and a new key file)
    key_file = tmp_path / "keyring.json"
    _ok(porpoise(None, "secrets", "init", "--key-file", str(key_file)))
    assert key_file.exists() and oct(key_file.stat().st_mode & 0o777) == "0o600"
    before = key_file.read_text()
    _ok(porpoise(None, "secrets", "init", "--key-file", str(key_file)))
    assert key_file.read_text() == before  # a keyring that is there is kept
    sealed = _ok(porpoise(None, "secrets", "encrypt-all", "--key-file", str(c.key_file), "--dsn", c.dsn))
    assert "every stored secret is sealed with key" in sealed
