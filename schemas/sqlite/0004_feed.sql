-- The feed: every entry's position in the event stream (its JetStream
-- sequence, set by ingest; 0 for entries stored before, or written by other
-- means), and the indexes that list an organization's (or a project's)
-- entries in persistence order: seq, then created_ms and event_id.
ALTER TABLE audit_logs ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tool_executions ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS audit_logs_org_feed ON audit_logs (organization_id, seq, created_ms, event_id);
CREATE INDEX IF NOT EXISTS audit_logs_project_feed ON audit_logs (organization_id, project_id, seq, created_ms, event_id);
CREATE INDEX IF NOT EXISTS tool_executions_org_feed ON tool_executions (organization_id, seq, created_ms, event_id);
CREATE INDEX IF NOT EXISTS tool_executions_project_feed ON tool_executions (organization_id, project_id, seq, created_ms, event_id);
