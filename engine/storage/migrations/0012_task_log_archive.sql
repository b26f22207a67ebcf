-- task logs that outlive their worker (issue 27 item 5): where each ended attempt's log was archived, queued
-- by a trigger when the attempt ends; the API's archiver copies the log into the blob store.
CREATE TABLE task_log_archive (
    task_instance_id BIGINT NOT NULL,
    workflow_instance_id BIGINT NOT NULL,
    state SMALLINT DEFAULT 0 NOT NULL,
    blob_key TEXT,
    log_size BIGINT,
    stored_size BIGINT,
    sha256 VARCHAR(64),
    truncated BOOLEAN DEFAULT false NOT NULL,
    tries INTEGER DEFAULT 0 NOT NULL,
    next_try TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL,
    reason TEXT,
    create_time TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL,
    archive_time TIMESTAMP WITH TIME ZONE,
    PRIMARY KEY (task_instance_id),
    FOREIGN KEY(task_instance_id) REFERENCES task_instance (id) ON DELETE CASCADE
);

CREATE INDEX task_log_archive_pending_idx ON task_log_archive (next_try) WHERE state = 0;

CREATE FUNCTION porpoise_queue_log_archive() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_log_archive (task_instance_id, workflow_instance_id)
    VALUES (NEW.id, NEW.workflow_instance_id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;

CREATE TRIGGER task_instance_log_archive AFTER INSERT OR UPDATE OF state, log_path ON task_instance
    FOR EACH ROW WHEN (NEW.state IN (3, 5, 6, 7, 8, 9, 13) AND NEW.host IS NOT NULL AND NEW.log_path IS NOT NULL)
    EXECUTE FUNCTION porpoise_queue_log_archive();
