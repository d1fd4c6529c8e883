-- Executions carry the principal that asked for them (execution/v1 fields
-- principal_id, principal_type, display_name, client_ip) beside user_id.
-- Rows stored before this migration read back with empty strings. One
-- column per statement: ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS,
-- so the migration runner skips an ADD COLUMN whose column already exists
-- (a migration that another instance applied at the same time).
ALTER TABLE tool_executions ADD COLUMN principal_id String DEFAULT '';
ALTER TABLE tool_executions ADD COLUMN principal_type String DEFAULT '';
ALTER TABLE tool_executions ADD COLUMN display_name String DEFAULT '';
ALTER TABLE tool_executions ADD COLUMN client_ip String DEFAULT ''
