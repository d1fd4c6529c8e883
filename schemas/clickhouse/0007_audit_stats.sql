-- Aggregates of the stats route (GET …/audit_logs/stats), so that 30 days
-- of a 10M-event tenant are counted from thousands of aggregate rows
-- instead of ten million entries. Kept by a materialized view in the
-- inserts of the rows themselves, as audit_hours (0002) is. One table and
-- one view for the three kinds of rows: each view adds a part to every
-- insert and to the merges behind it. The view costs inserts: measured
-- here (18.16, two busy shared cores, batches of 10k synthetic events of
-- 7000 resources), an insert took about twice as long with it as without;
-- most of its rows are those of kind 2 (the resources).
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

-- kind 0: entries per hour, scope, action, source and resource type — the
--         buckets of bucket=hour and bucket=day, with or without filters on
--         action, source and resource_type (value '').
-- kind 1: entries per UTC day, scope, principal (value), action, source and
--         resource type — the top actors, with or without those filters.
-- kind 2: entries per UTC day, scope, resource type and resource (value;
--         '' for entries without one, which readers skip) — the top
--         resources, with or without a filter on resource_type (not action
--         or source: a tenant touches many resources, and those combinations
--         would make this kind almost as large as audit_logs; such filters
--         read audit_logs).
-- The tops are per day, not per hour: a busy tenant's principals and
-- resources make many rows an hour; the partial days at the ends of a
-- window are read from audit_logs. t is the start of the hour or day (Unix
-- ms).
CREATE TABLE IF NOT EXISTS audit_stats (
    organization_id String,
    kind            UInt8,
    scope           String,
    t               Int64,
    value           String,
    action          UInt8,
    source          UInt8,
    resource_type   UInt8,
    n               UInt64
) ENGINE = SummingMergeTree
ORDER BY (organization_id, kind, scope, t, value, action, source, resource_type);

-- Two arrayJoins: every entry is counted under each kind and each of its
-- scopes (their product).
CREATE MATERIALIZED VIEW IF NOT EXISTS audit_stats_mv TO audit_stats AS
SELECT organization_id,
       arrayJoin([toUInt8(0), toUInt8(1), toUInt8(2)]) AS kind,
       arrayJoin(if(isNull(project_id), [''], ['', ifNull(project_id, '')])) AS scope,
       if(kind = 0, intDiv(ts_ms, 3600000) * 3600000, intDiv(ts_ms, 86400000) * 86400000) AS t,
       multiIf(kind = 1, principal_id, kind = 2, ifNull(resource_id, ''), '') AS value,
       if(kind = 2, toUInt8(0), action) AS action,
       if(kind = 2, toUInt8(0), source) AS source,
       ifNull(resource_type, toUInt8(0)) AS resource_type,
       count() AS n
FROM audit_logs
GROUP BY organization_id, kind, scope, t, value, action, source, resource_type;

-- Rows stored before this migration. Run again after an interruption (the
-- migration is recorded only once every statement ran), the backfill would
-- count those rows twice: the statements above are idempotent, this one is
-- not, so an interrupted migration should be repaired by truncating
-- audit_stats and running this insert again. Rows ingested while the
-- migration runs may be counted by both the view and the backfill, as in
-- 0002.
INSERT INTO audit_stats (organization_id, kind, scope, t, value, action, source, resource_type, n)
SELECT organization_id,
       arrayJoin([toUInt8(0), toUInt8(1), toUInt8(2)]) AS kind,
       arrayJoin(if(isNull(project_id), [''], ['', ifNull(project_id, '')])) AS scope,
       if(kind = 0, intDiv(ts_ms, 3600000) * 3600000, intDiv(ts_ms, 86400000) * 86400000) AS t,
       multiIf(kind = 1, principal_id, kind = 2, ifNull(resource_id, ''), '') AS value,
       if(kind = 2, toUInt8(0), action) AS action,
       if(kind = 2, toUInt8(0), source) AS source,
       ifNull(resource_type, toUInt8(0)) AS resource_type,
       count() AS n
FROM audit_logs
GROUP BY organization_id, kind, scope, t, value, action, source, resource_type
