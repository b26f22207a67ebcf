-- backfill chains: one command per (backfill, date index), ever. A date that ends twice (recovered, or
-- paused and resumed, with complementOnFailure CONTINUE) must not queue the next date a second time.
CREATE TABLE IF NOT EXISTS backfill_step (
    backfill_id BIGINT NOT NULL,
    backfill_index INTEGER NOT NULL,
    create_time TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL,
    PRIMARY KEY (backfill_id, backfill_index),
    FOREIGN KEY(backfill_id) REFERENCES backfill (id) ON DELETE CASCADE
);
-- the steps already queued by chains in progress
INSERT INTO backfill_step (backfill_id, backfill_index)
SELECT DISTINCT (command_param->>'backfillId')::bigint, (command_param->>'backfillIndex')::int
FROM (SELECT command_param FROM command UNION ALL SELECT command_param FROM workflow_instance) s
WHERE command_param ? 'backfillId' AND command_param ? 'backfillIndex'
  AND EXISTS (SELECT 1 FROM backfill b WHERE b.id = (s.command_param->>'backfillId')::bigint)
ON CONFLICT DO NOTHING;
