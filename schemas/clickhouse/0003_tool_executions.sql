-- Tool executions with the decisions of their hooks (execution/v1 events).
-- Same rules as audit_logs: first write wins (ver), LIMIT 1 BY event_id at
-- read time, portable DDL.
CREATE TABLE IF NOT EXISTS tool_executions (
    organization_id String,
    started_ms      Int64,
    event_id        String,
    execution_id    String,
    project_id      String,  -- '' when none
    user_id         String,
    toolkit         String,
    tool_name       String,
    tool_version    String,
    ended_ms        Int64,
    duration_ms     Float64,
    success         UInt8,
    execution_code  String,
    execution_error String,
    error_kind      String,
    hooks           String,
    created_ms      Int64,
    ver             UInt64
) ENGINE = ReplacingMergeTree(ver)
PARTITION BY toYYYYMM(toDateTime(intDiv(started_ms, 1000)))
ORDER BY (organization_id, started_ms, event_id)
