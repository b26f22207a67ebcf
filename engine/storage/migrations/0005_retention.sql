-- retention (issue #18): per-project history retention and the index the retention pass walks.
ALTER TABLE project ADD COLUMN IF NOT EXISTS keep_days integer CHECK (keep_days >= 0);
CREATE INDEX IF NOT EXISTS workflow_instance_retention_idx
    ON workflow_instance (project_code, end_time, id) WHERE state IN (3, 5, 6, 7, 16);
-- history at scale: the instances list by state or project newest first, the overview's running and failed runs.
CREATE INDEX IF NOT EXISTS workflow_instance_state_idx ON workflow_instance (state, id);
CREATE INDEX IF NOT EXISTS workflow_instance_project_idx ON workflow_instance (project_code, id);
