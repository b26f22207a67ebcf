"""The schema's objects beyond tables, on the tables' metadata: sequences, and the functions and triggers
that announce changes with NOTIFY. ``metadata.create_all`` (and so the generated schema.sql) emits them
through DDL events: the functions before the first table, each trigger right after its table."""

from __future__ import annotations

from sqlalchemy import DDL, Sequence, Table, event

from engine.states import TASK_FINISHED
from engine.storage.tables import command, metadata, task_instance, task_log_archive, workflow_instance

#: Codes of projects, workflow and task definitions (stable across versions, like DolphinScheduler's).
definition_code_seq = Sequence("definition_code_seq", start=1000000, metadata=metadata)
#: Fencing epochs: every change of a workflow instance's owner takes a fresh, never reused value.
workflow_epoch_seq = Sequence("workflow_epoch_seq", start=1, metadata=metadata)

#: Masters LISTEN on porpoise_command; one notification per inserting statement. A statement that inserts one
#: command announces its row (``row_to_json``; ``engine/master/announced.py``), so the master of its slot claims
#: it without reading the table first; any other statement, or a row too long for a notification's 8,000
#: bytes, announces nothing but its having happened (an empty payload: read the table).
NOTIFY_COMMAND = """\
CREATE FUNCTION porpoise_notify_command() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    payload text := '';
BEGIN
    IF (SELECT count(*) FROM (SELECT 1 FROM added LIMIT 2) s) = 1 THEN
        SELECT row_to_json(a)::text INTO payload FROM added a;
        IF octet_length(payload) > 7900 THEN
            payload := '';
        END IF;
    END IF;
    PERFORM pg_notify('porpoise_command', payload);
    RETURN NULL;
END;
$$"""

#: Live updates: the API server LISTENs on porpoise_state and pushes each change to browsers (server-sent
#: events). One notification per new row or changed state: 'w,<id>,<state>' or 't,<id>,<instance id>,<state>'.
NOTIFY_STATE = """\
CREATE FUNCTION porpoise_notify_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'workflow_instance' THEN
        PERFORM pg_notify('porpoise_state', 'w,' || NEW.id || ',' || NEW.state);
    ELSE
        PERFORM pg_notify('porpoise_state', 't,' || NEW.id || ',' || NEW.workflow_instance_id || ',' || NEW.state);
    END IF;
    RETURN NULL;
END;
$$"""

event.listen(metadata, "before_create", DDL(NOTIFY_COMMAND))
event.listen(metadata, "before_create", DDL(NOTIFY_STATE))
event.listen(
    command,
    "after_create",
    DDL(
        "CREATE TRIGGER command_notify AFTER INSERT ON command REFERENCING NEW TABLE AS added\n"
        "    FOR EACH STATEMENT EXECUTE FUNCTION porpoise_notify_command()"
    ),
)


def _state_triggers(table: Table) -> None:
    name = table.name
    for ddl in (
        f"CREATE TRIGGER {name}_state_insert AFTER INSERT ON {name}\n"
        "    FOR EACH ROW EXECUTE FUNCTION porpoise_notify_state()",
        f"CREATE TRIGGER {name}_state_update AFTER UPDATE OF state ON {name}\n"
        "    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION porpoise_notify_state()",
    ):
        event.listen(table, "after_create", DDL(ddl))


_state_triggers(workflow_instance)
_state_triggers(task_instance)


#: Task logs outlive their worker: an attempt that ended with a log on a worker gets a PENDING row in
#: task_log_archive, which the API's archiver (engine/api/logarchive.py) works through. A trigger, so every
#: writer of a final state (actors, takeovers, the API's force success) queues the log without knowing of it.
QUEUE_LOG_ARCHIVE = """\
CREATE FUNCTION porpoise_queue_log_archive() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_log_archive (task_instance_id, workflow_instance_id)
    VALUES (NEW.id, NEW.workflow_instance_id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$"""
#: task states after which an attempt writes no more log (engine.states.TASK_FINISHED)
FINISHED_CODES = ", ".join(str(int(s)) for s in sorted(TASK_FINISHED))
LOG_ARCHIVE_TRIGGER = (
    "CREATE TRIGGER task_instance_log_archive AFTER INSERT OR UPDATE OF state, log_path ON task_instance\n"
    f"    FOR EACH ROW WHEN (NEW.state IN ({FINISHED_CODES}) AND NEW.host IS NOT NULL AND NEW.log_path IS NOT NULL)\n"
    "    EXECUTE FUNCTION porpoise_queue_log_archive()"
)
event.listen(metadata, "before_create", DDL(QUEUE_LOG_ARCHIVE))
event.listen(task_log_archive, "after_create", DDL(LOG_ARCHIVE_TRIGGER))
