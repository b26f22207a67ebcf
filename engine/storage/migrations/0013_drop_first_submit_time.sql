-- task_instance.first_submit_time (DolphinScheduler's column dating its log folder and a task's delay) was written
-- at each attempt's insert and read by nothing: Porpoise dates neither by it, and the DolphinScheduler
-- importer and exporter do not carry task instances.
ALTER TABLE task_instance DROP COLUMN IF EXISTS first_submit_time;
