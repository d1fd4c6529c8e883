-- LeafTile's first read: an event's leaf index (a point of log_leaf_ids'
-- primary key, the newest write; withdrawn ones are -1). Its tiles are
-- read next with literal keys (log_tiles.sql): on ClickHouse 18.16 two
-- plain reads of a key cost less than one read with a subquery.
-- Arguments: org, kind, event id.
SELECT idx
FROM log_leaf_ids
WHERE organization_id = ? AND kind = ? AND event_id = ?
ORDER BY ver DESC
LIMIT 1
