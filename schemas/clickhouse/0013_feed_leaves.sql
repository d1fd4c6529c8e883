-- Each entry's tamper-evidence leaf (issue 24), stored beside it by the
-- writer: SHA-256(0x00 ‖ JCS of the item the list route serves), computed
-- from the row exactly as it is inserted (query.Leaves), 32 bytes; '' for
-- a row written without one (before this migration, or by a writer not
-- given Leaves): the sequencer computes those from the entry. feed_leaves
-- holds the leaves by feed position, so that the sequencer reads positions
-- and leaves (a range of the key) instead of the entries.
ALTER TABLE audit_logs ADD COLUMN leaf String DEFAULT '';

ALTER TABLE tool_executions ADD COLUMN leaf String DEFAULT '';

CREATE TABLE IF NOT EXISTS feed_leaves (
    organization_id String,
    kind            UInt8,
    seq             UInt64,
    created_ms      Int64,
    event_id        String,
    leaf            String
) ENGINE = ReplacingMergeTree
ORDER BY (organization_id, kind, seq, created_ms, event_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS feed_leaves_audit_mv TO feed_leaves AS
SELECT organization_id, toUInt8(0) AS kind, seq, created_ms, event_id, leaf
FROM audit_logs
WHERE leaf != '';

CREATE MATERIALIZED VIEW IF NOT EXISTS feed_leaves_executions_mv TO feed_leaves AS
SELECT organization_id, toUInt8(1) AS kind, seq, created_ms, event_id, leaf
FROM tool_executions
WHERE leaf != ''
