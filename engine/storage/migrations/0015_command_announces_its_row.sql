-- A statement that inserts one command announces its row on porpoise_command (row_to_json, when it fits a
-- notification's 8,000 bytes): the master of its slot claims it from the notification, one read of the
-- command table fewer per start. Any other insert still announces only that it happened (an empty payload).
CREATE OR REPLACE FUNCTION porpoise_notify_command() RETURNS trigger LANGUAGE plpgsql AS $$
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
$$;
DROP TRIGGER IF EXISTS command_notify ON command;
CREATE TRIGGER command_notify AFTER INSERT ON command REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION porpoise_notify_command();
