-- The salt of an entry (the event's optional `salt`, SaltBytes = 16 random
-- bytes chosen by the producer); NULL when the event has none (every entry
-- stored before, and an entry whose erasure forgot it). An entry with a
-- salt has a leaf of version 2 (internal/tlog/commit.go). Erasable
-- (auditstore.AuditErasable, ExecutionsErasable).
ALTER TABLE audit_logs ADD COLUMN salt BLOB;

ALTER TABLE tool_executions ADD COLUMN salt BLOB;
