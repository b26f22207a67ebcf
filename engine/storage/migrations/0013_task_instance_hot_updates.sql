-- An attempt's state writes (state, host, times, exit code, var pool, log tail) change no indexed column, so
-- PostgreSQL updates the row in place (a HOT update: no index touched) when its page has room: no index names
-- state or host any more, and each page keeps a fifth free for the next versions of its rows.
-- task_instance_unfinished_host_idx (host WHERE state IN the active states) was read by no query; its key and
-- predicate made every state write of an attempt add an entry to each of the table's indexes.
-- task_instance_workflow_idx (workflow_instance_id) is the leading column of the unique
-- (workflow_instance_id, task_code, attempt) index, which serves the same lookups.
DROP INDEX IF EXISTS task_instance_unfinished_host_idx;
DROP INDEX IF EXISTS task_instance_workflow_idx;
-- applies to the pages written from now on (a table rewrite would lock the table for its whole size)
ALTER TABLE task_instance SET (fillfactor = 80);
