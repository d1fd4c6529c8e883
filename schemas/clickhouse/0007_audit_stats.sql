-- Aggregates of the stats route (GET …/audit_logs/stats), so that 30 days
-- of a 10M-event tenant are counted from thousands of aggregate rows
-- instead of ten million entries. Kept by materialized views in the inserts
-- of the rows themselves, as audit_hours (0002) is.
--
-- scope: each group of entries is counted twice, under '' (the whole
-- organization) and under its project id (entries of a project only): the
-- organization's stats read one contiguous range of scope '' instead of
-- summing every project's rows. resource_type is 0 for entries without one
-- (the API names it RESOURCE_TYPE_UNSPECIFIED).
--
-- What they count: rows as inserted. event_index (0006) keeps a redelivered
-- event from being written again, so a redelivery counts once; only two
-- copies of one event inserted at the same moment (each insert looks the
-- other up before either is stored) are written twice, and then counted
-- twice here for good, where listings hide the copy (LIMIT 1 BY event_id).
-- Stats read from raw rows count rows too, so both paths answer the same;
-- that rare over-count is accepted for a histogram and documented in the
-- API (audit.yaml).

-- Entries per hour, scope, action, source and resource type: the buckets
-- of bucket=hour and bucket=day, with or without filters on action, source
-- and resource_type.
CREATE TABLE IF NOT EXISTS audit_stats_hours (
    organization_id String,
    scope           String,
    hour            Int64,
    action          UInt8,
    source          UInt8,
    resource_type   UInt8,
    n               UInt64
) ENGINE = SummingMergeTree
ORDER BY (organization_id, scope, hour, action, source, resource_type);

CREATE MATERIALIZED VIEW IF NOT EXISTS audit_stats_hours_mv TO audit_stats_hours AS
SELECT organization_id, arrayJoin(if(isNull(project_id), [''], ['', ifNull(project_id, '')])) AS scope,
       intDiv(ts_ms, 3600000) * 3600000 AS hour, action, source,
       ifNull(resource_type, toUInt8(0)) AS resource_type, count() AS n
FROM audit_logs
GROUP BY organization_id, scope, hour, action, source, resource_type;

-- Entries per UTC day, scope, principal, action, source and resource
-- type: the top actors, with or without those filters. Per day, not per
-- hour: a busy tenant's principals times the combinations of the filters
-- make many rows an hour; the partial days at the ends of a window are read
-- from audit_logs.
CREATE TABLE IF NOT EXISTS audit_stats_actors (
    organization_id String,
    scope           String,
    day             Int64,
    principal_id    String,
    action          UInt8,
    source          UInt8,
    resource_type   UInt8,
    n               UInt64
) ENGINE = SummingMergeTree
ORDER BY (organization_id, scope, day, principal_id, action, source, resource_type);

CREATE MATERIALIZED VIEW IF NOT EXISTS audit_stats_actors_mv TO audit_stats_actors AS
SELECT organization_id, arrayJoin(if(isNull(project_id), [''], ['', ifNull(project_id, '')])) AS scope,
       intDiv(ts_ms, 86400000) * 86400000 AS day, principal_id, action, source,
       ifNull(resource_type, toUInt8(0)) AS resource_type, count() AS n
FROM audit_logs
GROUP BY organization_id, scope, day, principal_id, action, source, resource_type;

-- Entries per UTC day, scope and resource: the top resources, with or
-- without a filter on resource_type (not on action or source: a tenant
-- touches many resources, and those combinations would make this table
-- almost as large as audit_logs; such filters read audit_logs). Entries
-- without a resource are kept under resource_id '' (readers skip it): a
-- WHERE on resource_id here would test the alias ifNull(resource_id, ''),
-- not the column.
CREATE TABLE IF NOT EXISTS audit_stats_resources (
    organization_id String,
    scope           String,
    day             Int64,
    resource_type   UInt8,
    resource_id     String,
    n               UInt64
) ENGINE = SummingMergeTree
ORDER BY (organization_id, scope, day, resource_type, resource_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS audit_stats_resources_mv TO audit_stats_resources AS
SELECT organization_id, arrayJoin(if(isNull(project_id), [''], ['', ifNull(project_id, '')])) AS scope,
       intDiv(ts_ms, 86400000) * 86400000 AS day,
       ifNull(resource_type, toUInt8(0)) AS resource_type, ifNull(resource_id, '') AS resource_id, count() AS n
FROM audit_logs
GROUP BY organization_id, scope, day, resource_type, resource_id;

-- Rows stored before this migration. Run again after an interruption (the
-- migration is recorded only once every statement ran), a backfill would
-- count those rows twice: the statements above are idempotent, these are
-- not, so an interrupted migration should be repaired by truncating the
-- three tables and running the three inserts again. Rows ingested while
-- the migration runs may be counted by both a view and a backfill, as in
-- 0002.
INSERT INTO audit_stats_hours (organization_id, scope, hour, action, source, resource_type, n)
SELECT organization_id, arrayJoin(if(isNull(project_id), [''], ['', ifNull(project_id, '')])) AS scope,
       intDiv(ts_ms, 3600000) * 3600000 AS hour, action, source,
       ifNull(resource_type, toUInt8(0)) AS resource_type, count() AS n
FROM audit_logs
GROUP BY organization_id, scope, hour, action, source, resource_type;

INSERT INTO audit_stats_actors (organization_id, scope, day, principal_id, action, source, resource_type, n)
SELECT organization_id, arrayJoin(if(isNull(project_id), [''], ['', ifNull(project_id, '')])) AS scope,
       intDiv(ts_ms, 86400000) * 86400000 AS day, principal_id, action, source,
       ifNull(resource_type, toUInt8(0)) AS resource_type, count() AS n
FROM audit_logs
GROUP BY organization_id, scope, day, principal_id, action, source, resource_type;

INSERT INTO audit_stats_resources (organization_id, scope, day, resource_type, resource_id, n)
SELECT organization_id, arrayJoin(if(isNull(project_id), [''], ['', ifNull(project_id, '')])) AS scope,
       intDiv(ts_ms, 86400000) * 86400000 AS day,
       ifNull(resource_type, toUInt8(0)) AS resource_type, ifNull(resource_id, '') AS resource_id, count() AS n
FROM audit_logs
GROUP BY organization_id, scope, day, resource_type, resource_id
