"""The metadata schema, defined once: SQLAlchemy Core tables (here and in auth_tables.py) plus the
sequences, functions and triggers of db_objects.py, all on one ``metadata``.

schema.sql is generated from this metadata (``python -m engine.storage.schema_sql
--write``; ``make lint`` and tests/test_schema.py fail when the committed file differs). A change here
also needs a migration in engine/storage/migrations/ (docs/ARCHITECTURE.md, "Schema and migrations");
tests/test_migrations.py fails when the migrated schema and this one differ.
"""

from __future__ import annotations

from sqlalchemy import (
    CHAR,
    TIMESTAMP,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from engine.states import (
    WORKFLOW_FAILOVER,
    WORKFLOW_FINISHED,
    ReleaseState,
    WorkflowState,
    sql_codes,
)
from engine.storage.task_logs import ArchiveState

metadata = MetaData()

schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("applied_at", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)

tenant = Table(
    "tenant",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("tenant_code", String(64), nullable=False, unique=True),
    Column("description", Text),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)


users = Table(
    "users",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("user_name", String(64), nullable=False, unique=True),
    Column("password_hash", String(255)),
    Column("user_type", SmallInteger, nullable=False, server_default=text("1")),
    Column("email", String(255)),
    Column("tenant_id", BigInteger, ForeignKey("tenant.id")),
    Column("state", SmallInteger, nullable=False, server_default=text("1")),
    Column("time_zone", String(64)),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    #: where the user signs in: 'local' (its password here) or 'ldap' (the directory, engine/api/directory.py)
    Column("auth_source", String(16), nullable=False, server_default=text("'local'")),
)


access_token = Table(
    "access_token",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("user_id", BigInteger, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(128), nullable=False),
    Column("token_hash", CHAR(64), nullable=False, unique=True),
    Column("expire_time", TIMESTAMP(timezone=True)),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("perm", SmallInteger),
    Column("created_by", BigInteger),
    Column("last_used_time", TIMESTAMP(timezone=True)),
    # the token that minted this one (None: made by a session, an admin for another user, or the CLI);
    # revoking a token revokes the tokens it minted
    Column("parent_id", BigInteger, ForeignKey("access_token.id", ondelete="CASCADE")),
    Index("access_token_parent_idx", "parent_id"),
)


worker_group = Table(
    "worker_group",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("name", String(64), nullable=False, unique=True),
    Column("addr_list", Text),
    Column("description", Text),
    Column("other_params_json", JSONB),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)


environment = Table(
    "environment",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("code", BigInteger, nullable=False, unique=True),
    Column("name", String(128), nullable=False, unique=True),
    Column("config", Text),
    Column("description", Text),
    Column("operator", BigInteger),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)


environment_worker_group_relation = Table(
    "environment_worker_group_relation",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("environment_code", BigInteger, ForeignKey("environment.code", ondelete="CASCADE"), nullable=False),
    Column("worker_group", String(64), nullable=False),
    Column("operator", BigInteger),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    UniqueConstraint("environment_code", "worker_group"),
)


datasource = Table(
    "datasource",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("name", String(128), nullable=False, unique=True),
    Column("type", String(32), nullable=False),
    Column("connection_params", JSONB, nullable=False),
    Column("note", Text),
    Column("user_id", BigInteger),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)


project = Table(
    "project",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("code", BigInteger, nullable=False, unique=True),
    Column("name", String(255), nullable=False, unique=True),
    Column("description", Text),
    Column("user_id", BigInteger),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("keep_days", Integer, CheckConstraint("keep_days >= 0")),  # None: history.keep_days
)


#: project parameters (DolphinScheduler 3.2 t_ds_project_parameter): name -> value for every task of the
#: project, below workflow globals; a secret value is stored sealed (engine/secretbox.py)
project_parameter = Table(
    "project_parameter",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("project_code", BigInteger, ForeignKey("project.code", ondelete="CASCADE"), nullable=False),
    Column("param_name", String(255), nullable=False),
    Column("param_value", Text, nullable=False),
    Column("secret", SmallInteger, nullable=False, server_default=text("0")),
    Column("user_id", BigInteger),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    UniqueConstraint("project_code", "param_name"),
)


workflow_definition = Table(
    "workflow_definition",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("code", BigInteger, nullable=False, unique=True),
    Column("name", String(255), nullable=False),
    Column("version", Integer, nullable=False, server_default=text("1")),
    Column("description", Text),
    Column("project_code", BigInteger, ForeignKey("project.code"), nullable=False),
    Column("release_state", SmallInteger, nullable=False, server_default=text("0")),
    Column("user_id", BigInteger),
    Column("global_params", JSONB, nullable=False, server_default=text("'[]'")),
    Column("locations", JSONB),
    Column("warning_group_id", BigInteger),
    Column("flag", SmallInteger, nullable=False, server_default=text("1")),
    Column("timeout", Integer, nullable=False, server_default=text("0")),
    Column("tenant_code", String(64), nullable=False, server_default=text("'default'")),
    Column("execution_type", SmallInteger, nullable=False, server_default=text("0")),
    Column("max_active_runs", Integer, nullable=False, server_default=text("0")),
    Column("timeout_strategy", SmallInteger, nullable=False, server_default=text("0")),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    UniqueConstraint("project_code", "name"),
)


workflow_definition_log = Table(
    "workflow_definition_log",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("code", BigInteger, nullable=False),
    Column("name", String(255), nullable=False),
    Column("version", Integer, nullable=False),
    Column("description", Text),
    Column("project_code", BigInteger, nullable=False),
    Column("release_state", SmallInteger, nullable=False, server_default=text("0")),
    Column("user_id", BigInteger),
    Column("global_params", JSONB, nullable=False, server_default=text("'[]'")),
    Column("locations", JSONB),
    Column("warning_group_id", BigInteger),
    Column("flag", SmallInteger, nullable=False, server_default=text("1")),
    Column("timeout", Integer, nullable=False, server_default=text("0")),
    Column("tenant_code", String(64), nullable=False, server_default=text("'default'")),
    Column("execution_type", SmallInteger, nullable=False, server_default=text("0")),
    Column("max_active_runs", Integer, nullable=False, server_default=text("0")),
    Column("timeout_strategy", SmallInteger, nullable=False, server_default=text("0")),
    Column("operator", BigInteger),
    Column("operate_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    UniqueConstraint("code", "version"),
)


task_definition = Table(
    "task_definition",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("code", BigInteger, nullable=False, unique=True),
    Column("name", String(255), nullable=False),
    Column("version", Integer, nullable=False, server_default=text("1")),
    Column("description", Text),
    Column("project_code", BigInteger, nullable=False),
    Column("user_id", BigInteger),
    Column("task_type", String(50), nullable=False),
    Column("task_execute_type", SmallInteger, nullable=False, server_default=text("0")),
    Column("task_params", JSONB, nullable=False, server_default=text("'{}'")),
    Column("flag", SmallInteger, nullable=False, server_default=text("1")),
    Column("task_priority", SmallInteger, nullable=False, server_default=text("2")),
    Column("worker_group", String(64), nullable=False, server_default=text("'default'")),
    Column("environment_code", BigInteger, nullable=False, server_default=text("-1")),
    Column("fail_retry_times", Integer, nullable=False, server_default=text("0")),
    Column("fail_retry_interval", Integer, nullable=False, server_default=text("1")),
    Column("timeout_flag", SmallInteger, nullable=False, server_default=text("0")),
    Column("timeout_notify_strategy", SmallInteger),
    Column("timeout", Integer, nullable=False, server_default=text("0")),
    Column("delay_time", Integer, nullable=False, server_default=text("0")),
    Column("cpu_quota", Integer, nullable=False, server_default=text("-1")),
    Column("memory_max", Integer, nullable=False, server_default=text("-1")),
    Column("task_group_id", BigInteger, nullable=False, server_default=text("0")),
    Column("task_group_priority", Integer, nullable=False, server_default=text("0")),
    Column("task_group_slots", Integer, nullable=False, server_default=text("1")),
    # task-level alerts: comma list of failure, success, retry, timeout; the group they go to
    Column("alert_on", String(64), nullable=False, server_default=text("''")),
    Column("alert_group_id", BigInteger),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)


task_definition_log = Table(
    "task_definition_log",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("code", BigInteger, nullable=False),
    Column("name", String(255), nullable=False),
    Column("version", Integer, nullable=False),
    Column("description", Text),
    Column("project_code", BigInteger, nullable=False),
    Column("user_id", BigInteger),
    Column("task_type", String(50), nullable=False),
    Column("task_execute_type", SmallInteger, nullable=False, server_default=text("0")),
    Column("task_params", JSONB, nullable=False, server_default=text("'{}'")),
    Column("flag", SmallInteger, nullable=False, server_default=text("1")),
    Column("task_priority", SmallInteger, nullable=False, server_default=text("2")),
    Column("worker_group", String(64), nullable=False, server_default=text("'default'")),
    Column("environment_code", BigInteger, nullable=False, server_default=text("-1")),
    Column("fail_retry_times", Integer, nullable=False, server_default=text("0")),
    Column("fail_retry_interval", Integer, nullable=False, server_default=text("1")),
    Column("timeout_flag", SmallInteger, nullable=False, server_default=text("0")),
    Column("timeout_notify_strategy", SmallInteger),
    Column("timeout", Integer, nullable=False, server_default=text("0")),
    Column("delay_time", Integer, nullable=False, server_default=text("0")),
    Column("cpu_quota", Integer, nullable=False, server_default=text("-1")),
    Column("memory_max", Integer, nullable=False, server_default=text("-1")),
    Column("task_group_id", BigInteger, nullable=False, server_default=text("0")),
    Column("task_group_priority", Integer, nullable=False, server_default=text("0")),
    Column("task_group_slots", Integer, nullable=False, server_default=text("1")),
    # task-level alerts: comma list of failure, success, retry, timeout; the group they go to
    Column("alert_on", String(64), nullable=False, server_default=text("''")),
    Column("alert_group_id", BigInteger),
    Column("operator", BigInteger),
    Column("operate_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    UniqueConstraint("code", "version"),
)


workflow_task_relation = Table(
    "workflow_task_relation",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("project_code", BigInteger, nullable=False),
    Column("workflow_definition_code", BigInteger, nullable=False),
    Column("workflow_definition_version", Integer, nullable=False),
    Column("pre_task_code", BigInteger, nullable=False, server_default=text("0")),
    Column("pre_task_version", Integer, nullable=False, server_default=text("0")),
    Column("post_task_code", BigInteger, nullable=False),
    Column("post_task_version", Integer, nullable=False),
    Column("condition_type", SmallInteger, nullable=False, server_default=text("0")),
    Column("condition_params", JSONB),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)


workflow_task_relation_log = Table(
    "workflow_task_relation_log",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("project_code", BigInteger, nullable=False),
    Column("workflow_definition_code", BigInteger, nullable=False),
    Column("workflow_definition_version", Integer, nullable=False),
    Column("pre_task_code", BigInteger, nullable=False, server_default=text("0")),
    Column("pre_task_version", Integer, nullable=False, server_default=text("0")),
    Column("post_task_code", BigInteger, nullable=False),
    Column("post_task_version", Integer, nullable=False),
    Column("condition_type", SmallInteger, nullable=False, server_default=text("0")),
    Column("condition_params", JSONB),
    Column("operator", BigInteger),
    Column("operate_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)


schedule = Table(
    "schedule",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column(
        "workflow_definition_code",
        BigInteger,
        ForeignKey("workflow_definition.code", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("start_time", TIMESTAMP(timezone=True), nullable=False),
    Column("end_time", TIMESTAMP(timezone=True), nullable=False),
    Column("timezone_id", String(64), nullable=False, server_default=text("'UTC'")),
    Column("crontab", String(255), nullable=False),
    Column("failure_strategy", SmallInteger, nullable=False, server_default=text("0")),
    Column("warning_type", SmallInteger, nullable=False, server_default=text("0")),
    Column("warning_group_id", BigInteger),
    Column("workflow_instance_priority", SmallInteger, nullable=False, server_default=text("2")),
    Column("worker_group", String(64), nullable=False, server_default=text("'default'")),
    Column("environment_code", BigInteger, nullable=False, server_default=text("-1")),
    Column("misfire_policy", String(16), nullable=False, server_default=text("'fire_all'")),
    Column("release_state", SmallInteger, nullable=False, server_default=text("0")),
    Column("user_id", BigInteger),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("fired_until", TIMESTAMP(timezone=True)),
    Index("schedule_online_idx", "id", postgresql_where=text(f"release_state = {int(ReleaseState.ONLINE)}")),
)


schedule_fire = Table(
    "schedule_fire",
    metadata,
    Column("schedule_id", BigInteger, ForeignKey("schedule.id", ondelete="CASCADE"), nullable=False),
    Column("fire_time", TIMESTAMP(timezone=True), nullable=False),
    Column("command_id", BigInteger, nullable=False),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    PrimaryKeyConstraint("schedule_id", "fire_time"),
)


command = Table(
    "command",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("command_type", SmallInteger, nullable=False),
    Column("workflow_definition_code", BigInteger, nullable=False),
    Column("workflow_definition_version", Integer, nullable=False, server_default=text("0")),
    Column("workflow_instance_id", BigInteger, nullable=False, server_default=text("0")),
    Column("command_param", JSONB, nullable=False, server_default=text("'{}'")),
    Column("task_depend_type", SmallInteger, nullable=False, server_default=text("2")),
    Column("failure_strategy", SmallInteger, nullable=False, server_default=text("0")),
    Column("warning_type", SmallInteger, nullable=False, server_default=text("0")),
    Column("warning_group_id", BigInteger),
    Column("schedule_id", BigInteger),
    Column("schedule_time", TIMESTAMP(timezone=True)),
    Column("start_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("executor_id", BigInteger),
    Column("workflow_instance_priority", SmallInteger, nullable=False, server_default=text("2")),
    Column("worker_group", String(64), nullable=False, server_default=text("'default'")),
    Column("environment_code", BigInteger, nullable=False, server_default=text("-1")),
    Column("dry_run", SmallInteger, nullable=False, server_default=text("0")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)


error_command = Table(
    "error_command",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    Column("command_type", SmallInteger, nullable=False),
    Column("workflow_definition_code", BigInteger, nullable=False),
    Column("workflow_definition_version", Integer, nullable=False, server_default=text("0")),
    Column("workflow_instance_id", BigInteger, nullable=False, server_default=text("0")),
    Column("command_param", JSONB, nullable=False, server_default=text("'{}'")),
    Column("task_depend_type", SmallInteger, nullable=False, server_default=text("2")),
    Column("failure_strategy", SmallInteger, nullable=False, server_default=text("0")),
    Column("warning_type", SmallInteger, nullable=False, server_default=text("0")),
    Column("warning_group_id", BigInteger),
    Column("schedule_id", BigInteger),
    Column("schedule_time", TIMESTAMP(timezone=True)),
    Column("start_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("executor_id", BigInteger),
    Column("workflow_instance_priority", SmallInteger, nullable=False, server_default=text("2")),
    Column("worker_group", String(64), nullable=False, server_default=text("'default'")),
    Column("environment_code", BigInteger, nullable=False, server_default=text("-1")),
    Column("dry_run", SmallInteger, nullable=False, server_default=text("0")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("message", Text, nullable=False),
)


backfill = Table(
    "backfill",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("workflow_definition_code", BigInteger, nullable=False),
    Column("dates", ARRAY(TIMESTAMP(timezone=True)), nullable=False),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)


#: the chain steps of a backfill already queued (one command per backfill and date index, ever: a date
#: that ends twice, recovered or resumed, must not queue the next date again)
backfill_step = Table(
    "backfill_step",
    metadata,
    Column("backfill_id", BigInteger, ForeignKey("backfill.id", ondelete="CASCADE"), primary_key=True),
    Column("backfill_index", Integer, primary_key=True),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)


workflow_instance = Table(
    "workflow_instance",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("name", String(255), nullable=False),
    Column("workflow_definition_code", BigInteger, nullable=False),
    Column("workflow_definition_version", Integer, nullable=False),
    Column("project_code", BigInteger, nullable=False),
    Column("state", SmallInteger, nullable=False),
    Column("state_history", JSONB, nullable=False, server_default=text("'[]'")),
    Column("recovery", SmallInteger, nullable=False, server_default=text("0")),
    Column("start_time", TIMESTAMP(timezone=True)),
    Column("end_time", TIMESTAMP(timezone=True)),
    Column("run_times", Integer, nullable=False, server_default=text("1")),
    Column("host", String(135)),
    Column("epoch", BigInteger, nullable=False, server_default=text("0")),
    Column("command_id", BigInteger, unique=True),
    Column("command_type", SmallInteger, nullable=False),
    Column("command_param", JSONB, nullable=False, server_default=text("'{}'")),
    Column("history_cmd", Text),
    Column("task_depend_type", SmallInteger, nullable=False, server_default=text("2")),
    Column("max_try_times", Integer, nullable=False, server_default=text("0")),
    Column("failure_strategy", SmallInteger, nullable=False, server_default=text("0")),
    Column("warning_type", SmallInteger, nullable=False, server_default=text("0")),
    Column("warning_group_id", BigInteger),
    Column("schedule_time", TIMESTAMP(timezone=True)),
    Column("command_start_time", TIMESTAMP(timezone=True)),
    Column("global_params", JSONB, nullable=False, server_default=text("'[]'")),
    Column("var_pool", JSONB, nullable=False, server_default=text("'[]'")),
    Column("flag", SmallInteger, nullable=False, server_default=text("1")),
    Column("is_sub_workflow", SmallInteger, nullable=False, server_default=text("0")),
    Column("executor_id", BigInteger),
    Column("workflow_instance_priority", SmallInteger, nullable=False, server_default=text("2")),
    Column("worker_group", String(64), nullable=False, server_default=text("'default'")),
    Column("environment_code", BigInteger, nullable=False, server_default=text("-1")),
    Column("timeout", Integer, nullable=False, server_default=text("0")),
    Column("tenant_code", String(64), nullable=False, server_default=text("'default'")),
    Column("dry_run", SmallInteger, nullable=False, server_default=text("0")),
    Column("next_workflow_instance_id", BigInteger, nullable=False, server_default=text("0")),
    Column("restart_time", TIMESTAMP(timezone=True)),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)


task_instance = Table(
    "task_instance",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("name", String(255), nullable=False),
    Column("task_type", String(50), nullable=False),
    Column("task_execute_type", SmallInteger, nullable=False, server_default=text("0")),
    Column("task_code", BigInteger, nullable=False),
    Column("task_definition_version", Integer, nullable=False),
    Column(
        "workflow_instance_id",
        BigInteger,
        ForeignKey("workflow_instance.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("state", SmallInteger, nullable=False),
    Column("attempt", Integer, nullable=False, server_default=text("1")),
    Column("retry_times", Integer, nullable=False, server_default=text("0")),
    Column("max_retry_times", Integer, nullable=False, server_default=text("0")),
    Column("retry_interval", Integer, nullable=False, server_default=text("0")),
    Column("submit_time", TIMESTAMP(timezone=True)),
    # DolphinScheduler's column, no longer written or read: kept (nullable) while nodes of the release that
    # still wrote it may run beside this one in a rolling upgrade; a later release drops it
    Column("first_submit_time", TIMESTAMP(timezone=True)),
    Column("start_time", TIMESTAMP(timezone=True)),
    Column("end_time", TIMESTAMP(timezone=True)),
    Column("host", String(135)),
    Column("pid", Integer),
    Column("exit_code", Integer),
    Column("execute_path", String(512)),
    Column("log_path", Text),
    #: the attempt's last log lines, as its worker reported them (secrets masked): alerts quote them
    Column("log_tail", Text),
    Column("app_link", Text),
    Column("alert_flag", SmallInteger, nullable=False, server_default=text("0")),
    Column("task_params", JSONB, nullable=False, server_default=text("'{}'")),
    Column("var_pool", JSONB, nullable=False, server_default=text("'[]'")),
    Column("flag", SmallInteger, nullable=False, server_default=text("1")),
    Column("task_instance_priority", SmallInteger, nullable=False, server_default=text("2")),
    Column("worker_group", String(64), nullable=False, server_default=text("'default'")),
    Column("environment_code", BigInteger, nullable=False, server_default=text("-1")),
    Column("environment_config", Text),
    Column("executor_id", BigInteger),
    Column("delay_time", Integer, nullable=False, server_default=text("0")),
    Column("dry_run", SmallInteger, nullable=False, server_default=text("0")),
    Column("cpu_quota", Integer, nullable=False, server_default=text("-1")),
    Column("memory_max", Integer, nullable=False, server_default=text("-1")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    # the external application the attempt started (a Spark application id); app_link: its UI link
    Column("app_id", String(255)),
    UniqueConstraint("workflow_instance_id", "task_code", "attempt"),
    # room on each page for an attempt's next versions: its state writes change no indexed column (no index
    # names state, host or the times), so PostgreSQL updates it in place (HOT) without touching an index;
    # half the page, as an attempt is written about 3.5 times after its insert (migration 0014)
    postgresql_with={"fillfactor": 50},
)


#: where an ended attempt's log was archived (engine/api/logarchive.py): a row appears when the attempt ends
#: (trigger ``task_instance_log_archive``), PENDING until the API's archiver copied the log from its worker
#: into the blob store (gzip, ``blob_key``) or gave up; it goes with its task instance (retention removes
#: the blobs of the instances it removes)
task_log_archive = Table(
    "task_log_archive",
    metadata,
    Column("task_instance_id", BigInteger, ForeignKey("task_instance.id", ondelete="CASCADE"), primary_key=True),
    Column("workflow_instance_id", BigInteger, nullable=False),
    #: 0 pending, 1 archived, 2 missing (the worker no longer had the log), 3 failed (gave up: worker gone)
    Column("state", SmallInteger, nullable=False, server_default=text("0")),
    Column("blob_key", Text),
    #: bytes of the log as archived (before compression), and of the stored blob
    Column("log_size", BigInteger),
    Column("stored_size", BigInteger),
    Column("sha256", String(64)),
    #: the archiver cut the log at api.log_archive_max_bytes (a last line says so)
    Column("truncated", Boolean, nullable=False, server_default=text("false")),
    Column("tries", Integer, nullable=False, server_default=text("0")),
    Column("next_try", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("reason", Text),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("archive_time", TIMESTAMP(timezone=True)),
    Index("task_log_archive_pending_idx", "next_try", postgresql_where=text(f"state = {int(ArchiveState.PENDING)}")),
)


sub_workflow_relation = Table(
    "sub_workflow_relation",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column(
        "parent_workflow_instance_id",
        BigInteger,
        ForeignKey("workflow_instance.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("parent_task_instance_id", BigInteger, nullable=False),
    Column("workflow_instance_id", BigInteger, nullable=False, server_default=text("0")),
    UniqueConstraint("parent_workflow_instance_id", "parent_task_instance_id"),
    Column("command_id", BigInteger),
)


alert_group = Table(
    "alert_group",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("group_name", String(255), nullable=False, unique=True),
    Column("description", Text),
    Column("create_user_id", BigInteger),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)


alert_sender = Table(
    "alert_sender",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("alert_group_id", BigInteger, ForeignKey("alert_group.id", ondelete="CASCADE"), nullable=False),
    Column("plugin_type", String(32), nullable=False),
    Column("name", String(255), nullable=False),
    Column("params", JSONB, nullable=False, server_default=text("'{}'")),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)


alert = Table(
    "alert",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("title", String(255), nullable=False),
    Column("sign", CHAR(64)),
    Column("content", Text, nullable=False),
    Column("alert_status", SmallInteger, nullable=False, server_default=text("0")),
    Column("warning_type", SmallInteger, nullable=False, server_default=text("2")),
    Column("alert_type", SmallInteger, nullable=False),
    Column("log", Text),
    Column("alert_group_id", BigInteger),
    Column("project_code", BigInteger),
    Column("workflow_definition_code", BigInteger),
    Column("workflow_instance_id", BigInteger),
    #: a task alert's attempt (its log is linked)
    Column("task_instance_id", BigInteger),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("next_attempt_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)


Index(
    "workflow_task_relation_definition_idx",
    workflow_task_relation.c.workflow_definition_code,
    workflow_task_relation.c.workflow_definition_version,
)
Index(
    "workflow_task_relation_log_definition_idx",
    workflow_task_relation_log.c.workflow_definition_code,
    workflow_task_relation_log.c.workflow_definition_version,
)
Index("command_priority_id_idx", command.c.workflow_instance_priority, command.c.id)
Index("workflow_instance_definition_idx", workflow_instance.c.workflow_definition_code, workflow_instance.c.id)
Index("workflow_instance_time_idx", workflow_instance.c.start_time, workflow_instance.c.end_time)
Index(
    "workflow_instance_waiting_idx",
    workflow_instance.c.workflow_definition_code,
    workflow_instance.c.id,
    postgresql_where=text(f"state = {int(WorkflowState.SERIAL_WAIT)}"),
)
Index(
    "workflow_instance_unfinished_host_idx",
    workflow_instance.c.host,
    postgresql_where=text(f"state IN {sql_codes(WORKFLOW_FAILOVER)}"),
)
Index("workflow_instance_state_idx", workflow_instance.c.state, workflow_instance.c.id)
Index("workflow_instance_project_idx", workflow_instance.c.project_code, workflow_instance.c.id)
Index(
    "workflow_instance_retention_idx",
    workflow_instance.c.project_code,
    workflow_instance.c.end_time,
    workflow_instance.c.id,
    postgresql_where=text(f"state IN {sql_codes(WORKFLOW_FINISHED)}"),
)
Index("task_instance_code_version_idx", task_instance.c.task_code, task_instance.c.task_definition_version)
Index(
    "task_instance_current_attempt_idx",
    task_instance.c.workflow_instance_id,
    task_instance.c.task_code,
    unique=True,
    postgresql_where=text("flag = 1"),
)
Index("sub_workflow_relation_child_idx", sub_workflow_relation.c.workflow_instance_id)
Index("sub_workflow_relation_command_idx", sub_workflow_relation.c.command_id)
Index("sub_workflow_relation_task_idx", sub_workflow_relation.c.parent_task_instance_id)
Index("alert_pending_idx", alert.c.id, postgresql_where=text("alert_status = 0"))


task_group = Table(
    "task_group",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("name", String(255), nullable=False, unique=True),
    Column("project_code", BigInteger),
    Column("group_size", Integer, CheckConstraint("group_size >= 0"), nullable=False),
    Column("description", Text),
    Column("user_id", BigInteger),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("update_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
)

task_group_queue = Table(
    "task_group_queue",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("task_group_id", BigInteger, ForeignKey("task_group.id", ondelete="CASCADE"), nullable=False),
    Column("task_instance_id", BigInteger, nullable=False, unique=True),
    Column("workflow_instance_id", BigInteger, nullable=False),
    Column("priority", Integer, nullable=False, server_default=text("0")),
    Column("slots", Integer, CheckConstraint("slots >= 1"), nullable=False),
    Column("status", SmallInteger, nullable=False, server_default=text("0")),
    Column("forced", SmallInteger, nullable=False, server_default=text("0")),
    Column("create_time", TIMESTAMP(timezone=True), nullable=False, server_default=text("now()")),
    Column("admit_time", TIMESTAMP(timezone=True)),
)
Index(
    "task_group_queue_order_idx",
    task_group_queue.c.task_group_id,
    task_group_queue.c.status,
    task_group_queue.c.priority.desc(),
    task_group_queue.c.id,
)


# The users / grants / audit tables live in their own module on the same metadata (keeps this one short),
# the sequences, functions and triggers in another.
from engine.storage import blob_tables, db_objects  # noqa: E402, F401
from engine.storage.auth_tables import (  # noqa: E402
    audit_log,
    login_attempt,
    project_user,
    resource_grant,
    user_session,
)

__all__ = ["audit_log", "login_attempt", "project_user", "resource_grant", "user_session"]
