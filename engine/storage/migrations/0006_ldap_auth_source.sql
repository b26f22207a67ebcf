-- LDAP sign-in (issue 29): where a user signs in, 'local' (its password here) or 'ldap' (the directory).
ALTER TABLE users ADD COLUMN IF NOT EXISTS auth_source varchar(16) DEFAULT 'local' NOT NULL;
