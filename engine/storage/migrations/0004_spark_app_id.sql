-- Spark on a cluster / Spark Connect (issue 19): the application an attempt started and its UI link.
-- task_instance.app_link exists already (DolphinScheduler's column); app_id is new.
ALTER TABLE task_instance ADD COLUMN IF NOT EXISTS app_id varchar(255);
