-- token rights (issue 24): the token that minted a token; revoking it revokes the tokens it minted.
ALTER TABLE access_token ADD COLUMN IF NOT EXISTS parent_id bigint REFERENCES access_token (id) ON DELETE CASCADE;
CREATE INDEX IF NOT EXISTS access_token_parent_idx ON access_token (parent_id);
