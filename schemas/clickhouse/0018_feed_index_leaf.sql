-- Each entry's leaf in the feed's index, beside its position: the
-- sequencer reads positions and leaves in one range of feed_index. The
-- views that copied the leaves into feed_leaves are dropped: each made a
-- part of a table more per insert, the most of what a row cost the server
-- there (feed_leaves keeps the rows it has, read no more). The new views
-- are made before the old ones are dropped, so that no insert meanwhile
-- misses the index (an entry indexed by both has one key, folded as any
-- copy; a reader prefers the copy with the leaf).
ALTER TABLE feed_index ADD COLUMN leaf String DEFAULT '';

CREATE MATERIALIZED VIEW IF NOT EXISTS feed_index_leaf_audit_mv TO feed_index AS
SELECT organization_id, toUInt8(0) AS kind,
       arrayJoin(if(isNull(project_id), [''], ['', ifNull(project_id, '')])) AS scope,
       seq, created_ms, event_id, ts_ms, leaf
FROM audit_logs;

CREATE MATERIALIZED VIEW IF NOT EXISTS feed_index_leaf_executions_mv TO feed_index AS
SELECT organization_id, toUInt8(1) AS kind,
       arrayJoin(if(project_id = '', [''], ['', project_id])) AS scope,
       seq, created_ms, event_id, started_ms AS ts_ms, leaf
FROM tool_executions;

DROP TABLE IF EXISTS feed_index_audit_mv;

DROP TABLE IF EXISTS feed_index_executions_mv;

DROP TABLE IF EXISTS feed_leaves_audit_mv;

DROP TABLE IF EXISTS feed_leaves_executions_mv
