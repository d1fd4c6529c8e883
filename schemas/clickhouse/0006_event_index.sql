-- One event_id, one row (issue 19): the event ids stored in audit_logs
-- (kind 0) and tool_executions (kind 1), sorted by id so that ingest can
-- look a batch's ids up by the primary key before writing. A re-sent event
-- that is already stored is not written again, whatever its timestamp (the
-- sort keys of the tables start with the time, so ReplacingMergeTree alone
-- folds only copies with the same time): the first write wins, as the
-- SQLite store's unique key does. Materialized views write here in the
-- inserts of the rows themselves.
CREATE TABLE IF NOT EXISTS event_index (
    organization_id String,
    kind            UInt8,
    event_id        String,
    ts_ms           Int64
) ENGINE = ReplacingMergeTree
ORDER BY (organization_id, kind, event_id);

-- Every row written from now on is indexed by the server, in the insert
-- that writes it (no second round trip from ingest).
CREATE MATERIALIZED VIEW IF NOT EXISTS event_index_audit_mv TO event_index AS
SELECT organization_id, toUInt8(0) AS kind, event_id, ts_ms
FROM audit_logs;

CREATE MATERIALIZED VIEW IF NOT EXISTS event_index_executions_mv TO event_index AS
SELECT organization_id, toUInt8(1) AS kind, event_id, started_ms AS ts_ms
FROM tool_executions;

-- Rows stored before this migration (run again after an interruption, it
-- only adds copies that the engine folds).
INSERT INTO event_index (organization_id, kind, event_id, ts_ms)
SELECT organization_id, 0 AS kind, event_id, min(ts_ms) AS ts_ms
FROM audit_logs
GROUP BY organization_id, event_id;

INSERT INTO event_index (organization_id, kind, event_id, ts_ms)
SELECT organization_id, 1 AS kind, event_id, min(started_ms) AS ts_ms
FROM tool_executions
GROUP BY organization_id, event_id;
