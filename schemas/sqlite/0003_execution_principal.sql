-- Executions carry the principal that asked for them (execution/v1 fields
-- principal_id, principal_type, display_name, client_ip) beside user_id.
-- Rows stored before this migration read back with empty strings.
ALTER TABLE tool_executions ADD COLUMN principal_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_executions ADD COLUMN principal_type TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_executions ADD COLUMN display_name TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_executions ADD COLUMN client_ip TEXT NOT NULL DEFAULT '';
