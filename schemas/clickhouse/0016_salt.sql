-- The salt of an entry (the event's optional `salt`, SaltBytes = 16 random
-- bytes chosen by the producer): its raw bytes, '' when the event has none
-- (every entry stored before, and an entry whose erasure forgot it). An
-- entry with a salt has a leaf of version 2 (internal/tlog/commit.go).
-- Erasable (auditstore.AuditErasable, ExecutionsErasable). See sqlite/0015.
ALTER TABLE audit_logs ADD COLUMN salt String DEFAULT '';

ALTER TABLE tool_executions ADD COLUMN salt String DEFAULT ''
