-- Hourly execution counts per organization and project ('' = none), kept by
-- a materialized view, as audit_hours is for audit_logs: executions listings
-- read them to scan only the newest hours that hold a page. Counts are a
-- guide (a redelivered execution may count twice), never a filter.
CREATE TABLE IF NOT EXISTS execution_hours (
    organization_id String,
    project_id      String,
    hour            Int64,
    n               UInt64
) ENGINE = SummingMergeTree
ORDER BY (organization_id, project_id, hour);

CREATE MATERIALIZED VIEW IF NOT EXISTS execution_hours_mv TO execution_hours AS
SELECT organization_id, project_id,
       intDiv(started_ms, 3600000) * 3600000 AS hour, count() AS n
FROM tool_executions
GROUP BY organization_id, project_id, hour;

-- Rows stored before this migration.
INSERT INTO execution_hours (organization_id, project_id, hour, n)
SELECT organization_id, project_id,
       intDiv(started_ms, 3600000) * 3600000 AS hour, count() AS n
FROM tool_executions
GROUP BY organization_id, project_id, hour
