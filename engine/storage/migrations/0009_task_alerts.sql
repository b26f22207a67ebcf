-- task-level alerts (issue 29): a task's alert_on and alert group, each attempt's last log lines, the
-- attempt an alert is about.
ALTER TABLE task_definition ADD COLUMN IF NOT EXISTS alert_on varchar(64) NOT NULL DEFAULT '';
ALTER TABLE task_definition ADD COLUMN IF NOT EXISTS alert_group_id bigint;
ALTER TABLE task_definition_log ADD COLUMN IF NOT EXISTS alert_on varchar(64) NOT NULL DEFAULT '';
ALTER TABLE task_definition_log ADD COLUMN IF NOT EXISTS alert_group_id bigint;
ALTER TABLE task_instance ADD COLUMN IF NOT EXISTS log_tail text;
ALTER TABLE alert ADD COLUMN IF NOT EXISTS task_instance_id bigint;
