-- The feed (GET …/audit_logs/feed, …/tool_executions/feed): entries in the
-- order they were persisted. seq is an entry's position in the event
-- stream (its JetStream sequence, set by ingest; 0 for entries stored
-- before this migration or written by other means, which come first in
-- created_ms order). One column per statement: 18.16 has no ADD COLUMN IF
-- NOT EXISTS; the migration runner skips an existing column.
ALTER TABLE audit_logs ADD COLUMN seq UInt64 DEFAULT 0;
ALTER TABLE tool_executions ADD COLUMN seq UInt64 DEFAULT 0;

-- The feed's index: an organization's entries (kind 0) and executions
-- (kind 1) sorted by (seq, created_ms, event_id), each under scope ''
-- (the organization) and, when it has one, under its project id, so that
-- a project's feed reads its own range. A feed page reads its keys here
-- and then the rows of audit_logs / tool_executions by primary key
-- ((ts_ms, event_id) IN …, which 18.16 resolves through the key). A copy
-- written twice (two inserts racing past event_index) has one key and is
-- folded by the merges and by LIMIT 1 BY event_id.
CREATE TABLE IF NOT EXISTS feed_index (
    organization_id String,
    kind            UInt8,
    scope           String,
    seq             UInt64,
    created_ms      Int64,
    event_id        String,
    ts_ms           Int64
) ENGINE = ReplacingMergeTree
ORDER BY (organization_id, kind, scope, seq, created_ms, event_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS feed_index_audit_mv TO feed_index AS
SELECT organization_id, toUInt8(0) AS kind,
       arrayJoin(if(isNull(project_id), [''], ['', ifNull(project_id, '')])) AS scope,
       seq, created_ms, event_id, ts_ms
FROM audit_logs;

CREATE MATERIALIZED VIEW IF NOT EXISTS feed_index_executions_mv TO feed_index AS
SELECT organization_id, toUInt8(1) AS kind,
       arrayJoin(if(project_id = '', [''], ['', project_id])) AS scope,
       seq, created_ms, event_id, started_ms AS ts_ms
FROM tool_executions;

-- Entries stored before: after the views exist, so that none is missed (a
-- row indexed twice has one key).
INSERT INTO feed_index (organization_id, kind, scope, seq, created_ms, event_id, ts_ms)
SELECT organization_id, toUInt8(0) AS kind,
       arrayJoin(if(isNull(project_id), [''], ['', ifNull(project_id, '')])) AS scope,
       seq, created_ms, event_id, ts_ms
FROM audit_logs;

INSERT INTO feed_index (organization_id, kind, scope, seq, created_ms, event_id, ts_ms)
SELECT organization_id, toUInt8(1) AS kind,
       arrayJoin(if(project_id = '', [''], ['', project_id])) AS scope,
       seq, created_ms, event_id, started_ms AS ts_ms
FROM tool_executions
